// The int8 model's representation in a checkpoint file (see int8_format.h).
#include "checkpoint/int8_format.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/printable.h"
#include "kernels/gemm/int8_gemm.h"

namespace vit::checkpoint {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::pair<std::string, nn::Linear*>> named_linears(const nn::Module& root) {
  std::vector<std::pair<std::string, nn::Linear*>> out;
  const auto walk = [&out](const auto& self, const nn::Module& m, const std::string& prefix) -> void {
    for (const auto& [name, child] : m.named_children()) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      if (auto* l = dynamic_cast<nn::Linear*>(child.get())) out.emplace_back(full, l);
      self(self, *child, full);
    }
  };
  walk(walk, root, "");
  return out;
}

bool is_quantized(const model::VisionTransformer& model) {
  for (const auto& [name, l] : named_linears(model)) {
    if (l->quantized()) return true;
  }
  return false;
}

int quantization_bits(const std::string& metadata, const std::string& path) {
  if (metadata.empty()) return 0;
  std::string scheme;
  try {
    const auto j = nlohmann::json::parse(metadata);
    VIT_CHECK(j.is_object() && j.contains("scheme") && j["scheme"].is_string(), "checkpoint",
              "{}: metadata 'quantization' has no \"scheme\"", path);
    scheme = j["scheme"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: metadata 'quantization' is not {{\"scheme\": ..., \"tensors\": [names]}} ({})", path,
         e.what());
  }
  if (scheme == kQuantizationScheme8) return 8;
  VIT_CHECK(scheme == kQuantizationScheme7, "checkpoint",
            "{}: metadata 'quantization' scheme is '{}'; this vit reads '{}' (8-bit weights) and '{}' (7-bit)", path,
            printable(scheme), kQuantizationScheme8, kQuantizationScheme7);
  return 7;
}

std::string quantization_metadata(const model::VisionTransformer& model) {
  std::vector<std::string> names;
  int bits = 0;
  for (const auto& [name, l] : named_linears(model)) {
    if (!l->quantized()) continue;
    names.push_back(name + ".weight");
    VIT_CHECK(bits == 0 || bits == l->weight_bits, "checkpoint",
              "'{}' has {}-bit weights, the Linears before it {}-bit: one file holds one scheme", names.back(),
              l->weight_bits, bits);
    bits = l->weight_bits;
  }
  if (names.empty()) return "";
  const int32_t wmax = kernels::int8_weight_max(bits);
  return nlohmann::json{
      {"scheme", bits == 8 ? kQuantizationScheme8 : kQuantizationScheme7},
      {"weights", fmt::format("int8 per output channel, symmetric, values in [-{}, {}] ({} bits), float32 scale "
                              "'<name>_scale'",
                              wmax, wmax, bits)},
      {"activations", "uint8 per row (token), asymmetric, quantized at run time"},
      {"tensors", names}}
      .dump();
}

model::NamedTensors quantization_scales(const model::VisionTransformer& model) {
  model::NamedTensors out;
  for (const auto& [name, l] : named_linears(model)) {
    if (l->quantized()) out.emplace_back(name + ".weight" + kScaleSuffix, l->weight_scale);
  }
  return out;
}

model::NamedTensors split_quantization(model::NamedTensors& weights, const std::string& metadata,
                                       const std::string& path) {
  std::set<std::string> listed;
  const int bits = quantization_bits(metadata, path);
  if (!metadata.empty()) {
    try {
      const auto j = nlohmann::json::parse(metadata);
      const auto names = j.at("tensors").get<std::vector<std::string>>();
      VIT_CHECK(!names.empty(), "checkpoint", "{}: metadata 'quantization' lists no tensors", path);
      for (const auto& n : names) {
        VIT_CHECK(listed.insert(n).second, "checkpoint", "{}: metadata 'quantization' lists '{}' twice", path,
                  printable(n));
      }
    } catch (const nlohmann::json::exception& e) {
      fail("checkpoint", "{}: metadata 'quantization' is not {{\"scheme\": ..., \"tensors\": [names]}} ({})", path,
           e.what());
    }
  }
  model::NamedTensors scales, kept;
  std::map<std::string, Tensor> int8;
  for (auto& [name, t] : weights) {
    if (ends_with(name, kScaleSuffix)) {
      const std::string weight = name.substr(0, name.size() - std::string(kScaleSuffix).size());
      VIT_CHECK(listed.count(weight), "checkpoint", "{}: tensor '{}' is a scale, but '{}' is not a quantized tensor{}",
                path, printable(name), printable(weight),
                metadata.empty() ? " (the file has no 'quantization' metadata)" : "");
      scales.emplace_back(name, t);
      continue;
    }
    if (t.dtype() == DType::I8) {
      VIT_CHECK(listed.count(name), "checkpoint", "{}: tensor '{}' is int8 but {}", path, printable(name),
                metadata.empty() ? "the file has no 'quantization' metadata" : "not listed as quantized");
      int8[name] = t;
    } else {
      VIT_CHECK(!listed.count(name), "checkpoint", "{}: tensor '{}' is listed as quantized but is {}, not int8", path,
                printable(name), dtype_name(t.dtype()));
    }
    kept.emplace_back(name, t);
  }
  for (const auto& name : listed) {
    VIT_CHECK(int8.count(name), "checkpoint", "{}: quantized tensor '{}' is missing", path, printable(name));
  }
  std::set<std::string> scaled;
  for (const auto& [name, s] : scales) {
    const std::string weight = name.substr(0, name.size() - std::string(kScaleSuffix).size());
    const Tensor& q = int8.at(weight);
    scaled.insert(weight);
    VIT_CHECK(q.dim() == 2, "checkpoint", "{}: quantized tensor '{}' is {}, not a matrix", path, weight,
              shape_str(q.shape()));
    VIT_CHECK(s.dtype() == DType::F32 && s.dim() == 1 && s.size(0) == q.size(0), "checkpoint",
              "{}: scale '{}' is {} {}; '{}' {} needs float32 ({})", path, name, dtype_name(s.dtype()),
              shape_str(s.shape()), weight, shape_str(q.shape()), q.size(0));
    const Tensor sc = s.contiguous();
    for (int64_t i = 0; i < sc.numel(); ++i) {
      const float v = sc.data<float>()[i];
      VIT_CHECK(std::isfinite(v) && v > 0, "checkpoint",
                "{}: scale '{}' holds {} at index {} (scales must be finite and > 0)", path, name, number_str(v), i);
    }
    // Values outside the scheme's range ([-63, 63] or [-127, 127]; -128 never) are refused.
    const int32_t wmax = kernels::int8_weight_max(bits);
    const Tensor qc = q.contiguous();
    const int8_t* p = qc.data<int8_t>();
    int worst = 0;
    for (int64_t i = 0; i < qc.numel(); ++i) worst = std::max(worst, std::abs(static_cast<int>(p[i])));
    if (worst > wmax) {
      int64_t i = 0;
      while (std::abs(static_cast<int>(p[i])) <= wmax) ++i;
      fail("checkpoint", "{}: quantized tensor '{}' holds {} at ({}, {}), outside [-{}, {}] ({}-bit weights)", path,
           weight, static_cast<int>(p[i]), i / q.size(1), i % q.size(1), wmax, wmax, bits);
    }
  }
  for (const auto& [name, q] : int8) {
    VIT_CHECK(scaled.count(name), "checkpoint", "{}: quantized tensor '{}' has no scale '{}{}'", path, name, name,
              kScaleSuffix);
  }
  weights = std::move(kept);
  return scales;
}

void prepare_quantized(model::VisionTransformer& model, const model::NamedTensors& scales, int bits,
                       const std::string& path) {
  if (scales.empty()) return;
  std::map<std::string, nn::Linear*> linears;
  for (const auto& [name, l] : named_linears(model)) linears[name + ".weight" + kScaleSuffix] = l;
  for (const auto& [name, s] : scales) {
    const auto it = linears.find(name);
    VIT_CHECK(it != linears.end(), "checkpoint", "{}: scale '{}' belongs to no Linear layer of the model", path, name);
    nn::Linear& l = *it->second;
    VIT_CHECK(s.dim() == 1 && s.size(0) == l.out_features, "checkpoint", "{}: scale '{}' is {}, expected ({})", path,
              name, shape_str(s.shape()), l.out_features);
    // A placeholder (untouched memory: no resident pages) that load_state_dict replaces.
    l.weight.node()->data = Tensor::empty({l.out_features, l.in_features}, DType::I8);
    l.weight.node()->requires_grad = false;
    l.weight_scale = s.contiguous();
    l.weight_bits = bits;
  }
}

}  // namespace vit::checkpoint
