// bfloat16 weights in a checkpoint file (see bf16_format.h).
#include "checkpoint/bf16_format.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/printable.h"
#include "kernels/gemm/bf16_gemm.h"
#include "nn/layers.h"

namespace vit::checkpoint {
namespace {

// The weight Variables stored as BF16, with their dotted names, in module order.
std::vector<std::pair<std::string, Variable>> bf16_weights(const model::VisionTransformer& model) {
  std::vector<std::pair<std::string, Variable>> out;
  const auto walk = [&out](const auto& self, const nn::Module& m, const std::string& prefix) -> void {
    for (const auto& [name, child] : m.named_children()) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      if (const auto* l = dynamic_cast<const nn::Linear*>(child.get())) {
        VIT_CHECK(!l->quantized(), "checkpoint", "{}: an int8 Linear cannot be stored as bfloat16", full);
        out.emplace_back(full + ".weight", l->weight);
      } else if (const auto* c = dynamic_cast<const nn::Conv2d*>(child.get())) {
        out.emplace_back(full + ".weight", c->weight);
      }
      self(self, *child, full);
    }
  };
  walk(walk, model, "");
  return out;
}

}  // namespace

std::vector<std::string> bf16_weight_names(const model::VisionTransformer& model) {
  std::vector<std::string> names;
  for (const auto& [name, weight] : bf16_weights(model)) names.push_back(name);
  return names;
}

io::Bf16Bits bf16_weight_bits(const model::VisionTransformer& model) {
  io::Bf16Bits bits;
  for (const auto& [name, weight] : bf16_weights(model)) {
    const Tensor w = weight.data().contiguous();
    VIT_CHECK(w.dtype() == DType::F32, "checkpoint", "weight '{}' is {}, not float32", name, dtype_name(w.dtype()));
    std::vector<uint16_t>& b = bits[name];
    b.resize(static_cast<size_t>(w.numel()));
    const float* p = w.data<float>();
    const int64_t big = kernels::bf16_overflow_index(p, w.numel());
    VIT_CHECK(big < 0, "checkpoint",
              "weight '{}' holds {:g} (element {}), past bfloat16's largest finite value 3.3895e38: stored as "
              "bfloat16 it would become infinity, which no load accepts; keep this model in float32",
              name, p[big < 0 ? 0 : big], big);
    for (int64_t i = 0; i < w.numel(); ++i) b[static_cast<size_t>(i)] = kernels::to_bf16(p[i]);
  }
  return bits;
}

std::string bf16_storage_metadata(const std::vector<std::string>& names) {
  return nlohmann::ordered_json{
      {"scheme", kBf16Scheme}, {"dtype", "BF16"}, {"rounding", "nearest-even"}, {"tensors", names}}
      .dump();
}

std::vector<std::string> bf16_storage_names(const std::string& metadata) {
  if (metadata.empty()) return {};
  return nlohmann::json::parse(metadata).at("tensors").get<std::vector<std::string>>();
}

std::vector<std::string> check_bf16_storage(const io::WeightsFile& file, const std::string& metadata) {
  const std::string& path = file.path;
  std::string scheme;
  std::vector<std::string> names;
  try {
    const auto j = nlohmann::json::parse(metadata);
    VIT_CHECK(j.is_object() && j.contains("scheme") && j["scheme"].is_string() && j.contains("tensors"), "checkpoint",
              "{}: metadata '{}' has no \"scheme\" or no \"tensors\"", path, kStorageKey);
    scheme = j["scheme"].get<std::string>();
    names = j["tensors"].get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: metadata '{}' is not {{\"scheme\": ..., \"tensors\": [names]}} ({})", path, kStorageKey,
         e.what());
  }
  VIT_CHECK(scheme == kBf16Scheme, "checkpoint", "{}: metadata '{}' scheme is '{}'; this vit reads '{}'", path,
            kStorageKey, printable(scheme), kBf16Scheme);
  std::map<std::string, std::string> stored;  // tensor name -> dtype as stored
  for (const auto& span : file.spans) stored[span.name] = span.dtype;
  std::set<std::string> listed;
  for (const std::string& name : names) {
    const auto it = stored.find(name);
    VIT_CHECK(it != stored.end(), "checkpoint", "{}: metadata '{}' lists '{}', which the file does not hold", path,
              kStorageKey, printable(name));
    VIT_CHECK(it->second == "BF16" && name.rfind("optimizer.", 0) != 0 && name.rfind("ema.", 0) != 0, "checkpoint",
              "{}: metadata '{}' lists '{}', stored as {} (a weight stored as BF16 is expected)", path, kStorageKey,
              printable(name), it->second);
    VIT_CHECK(listed.insert(name).second, "checkpoint", "{}: metadata '{}' lists '{}' twice", path, kStorageKey,
              printable(name));
  }
  for (const auto& [name, dtype] : stored) {
    VIT_CHECK(dtype != "BF16" || listed.count(name), "checkpoint",
              "{}: tensor '{}' is stored as BF16 but metadata '{}' does not list it", path, printable(name),
              kStorageKey);
  }
  return names;
}

}  // namespace vit::checkpoint
