// The int8 model's representation in a checkpoint file (see int8_format.h).
#include "checkpoint/int8_format.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/int8_gemm.h"

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

std::string quantization_metadata(const model::VisionTransformer& model) {
  std::vector<std::string> names;
  for (const auto& [name, l] : named_linears(model)) {
    if (l->quantized()) names.push_back(name + ".weight");
  }
  if (names.empty()) return "";
  return nlohmann::json{
      {"scheme", kQuantizationScheme},
      {"weights", "int8 per output channel, symmetric, values in [-63, 63] (7 bits), float32 scale '<name>_scale'"},
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
  if (!metadata.empty()) {
    try {
      const auto j = nlohmann::json::parse(metadata);
      VIT_CHECK(j.is_object() && j.contains("scheme") && j["scheme"].is_string(), "checkpoint",
                "{}: metadata 'quantization' has no \"scheme\"", path);
      const auto scheme = j["scheme"].get<std::string>();
      VIT_CHECK(scheme == kQuantizationScheme, "checkpoint",
                "{}: metadata 'quantization' scheme is '{}'; this vit reads '{}'", path, scheme, kQuantizationScheme);
      const auto names = j.at("tensors").get<std::vector<std::string>>();
      VIT_CHECK(!names.empty(), "checkpoint", "{}: metadata 'quantization' lists no tensors", path);
      for (const auto& n : names) {
        VIT_CHECK(listed.insert(n).second, "checkpoint", "{}: metadata 'quantization' lists '{}' twice", path, n);
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
                path, name, weight, metadata.empty() ? " (the file has no 'quantization' metadata)" : "");
      scales.emplace_back(name, t);
      continue;
    }
    if (t.dtype() == DType::I8) {
      VIT_CHECK(listed.count(name), "checkpoint", "{}: tensor '{}' is int8 but {}", path, name,
                metadata.empty() ? "the file has no 'quantization' metadata" : "not listed as quantized");
      int8[name] = t;
    } else {
      VIT_CHECK(!listed.count(name), "checkpoint", "{}: tensor '{}' is listed as quantized but is {}, not int8", path,
                name, dtype_name(t.dtype()));
    }
    kept.emplace_back(name, t);
  }
  for (const auto& name : listed) {
    VIT_CHECK(int8.count(name), "checkpoint", "{}: quantized tensor '{}' is missing", path, name);
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
    // Values outside [-63, 63] could saturate the AVX2 kernel (kernels/int8_gemm.h): refused.
    const Tensor qc = q.contiguous();
    const int8_t* p = qc.data<int8_t>();
    int worst = 0;
    for (int64_t i = 0; i < qc.numel(); ++i) worst = std::max(worst, std::abs(static_cast<int>(p[i])));
    if (worst > kernels::kInt8WeightMax) {
      int64_t i = 0;
      while (std::abs(static_cast<int>(p[i])) <= kernels::kInt8WeightMax) ++i;
      fail("checkpoint", "{}: quantized tensor '{}' holds {} at ({}, {}), outside [-{}, {}] (7-bit weights)", path,
           weight, static_cast<int>(p[i]), i / q.size(1), i % q.size(1), kernels::kInt8WeightMax,
           kernels::kInt8WeightMax);
    }
  }
  for (const auto& [name, q] : int8) {
    VIT_CHECK(scaled.count(name), "checkpoint", "{}: quantized tensor '{}' has no scale '{}{}'", path, name, name,
              kScaleSuffix);
  }
  weights = std::move(kept);
  return scales;
}

void prepare_quantized(model::VisionTransformer& model, const model::NamedTensors& scales, const std::string& path) {
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
  }
}

}  // namespace vit::checkpoint
