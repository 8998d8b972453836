// An ONNX model as a model source (see model_source.h): the graph recognised as a ViT
// (model/layouts/onnx.h), then the config, class names and preprocessing from vit export's
// metadata when it wrote the file, or from the shapes and the exporter's names otherwise.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/printable.h"
#include "infer/model_source.h"
#include "model/layouts/config_from_shapes.h"
#include "model/layouts/onnx.h"

namespace vit::infer {

namespace {

std::string meta(const io::OnnxModel& m, const std::string& key) {
  auto it = m.metadata.find(key);
  return it == m.metadata.end() ? std::string() : it->second;
}

// vit export's metadata: the config, class names, preprocessing and family it recorded.
void read_vit_metadata(const io::OnnxModel& m, ModelSource& s) {
  LoadedModel& d = s.described;
  try {
    s.config = model::ViTConfig::from_json(meta(m, "vit.config"));
  } catch (const Error& e) {
    fail("onnx", "{}: metadata 'vit.config' is not a model config: {}", m.path, e.what());
  }
  s.records_config = true;
  s.recorded_heads = s.config.num_heads;
  if (const std::string names = meta(m, "vit.class_names"); !names.empty()) {
    try {
      d.class_names = nlohmann::json::parse(names).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      fail("onnx", "{}: metadata 'vit.class_names' is not a JSON list of strings", m.path);
    }
    VIT_CHECK(static_cast<int64_t>(d.class_names.size()) <= std::max<int64_t>(s.config.num_classes, 0), "onnx",
              "{}: metadata 'vit.class_names' names {} classes for a head of {}", m.path, d.class_names.size(),
              s.config.num_classes);
  }
  if (const std::string p = meta(m, "vit.preprocess"); !p.empty()) {
    d.preprocess = parse_preprocess(p, s.config.in_channels, m.path);
  }
  if (const std::string f = meta(m, "vit.family"); !f.empty()) d.family = model::parse_family(f, m.path, "onnx");
}

}  // namespace

ModelSource onnx_source(const io::OnnxModel& m, const LoadSettings& options) {
  const std::string& path = m.path;
  VIT_CHECK(!options.layout, "onnx", "{}: an ONNX model's weights are found by its graph; --layout does not apply",
            path);
  VIT_CHECK(options.weights != WeightSet::Ema, "onnx", "{}: an ONNX model holds one set of weights (no EMA)", path);
  ModelSource s;
  LoadedModel& d = s.described;
  const bool ours = !meta(m, "vit.config").empty();
  if (ours) read_vit_metadata(m, s);
  model::OnnxRecognised r = model::recognise_onnx_vit(m, ours ? &s.config : nullptr);
  d.format = io::WeightsFormat::Onnx;
  d.layout = model::layout_name(r.layout);
  if (!ours) d.family = r.converted.family;
  s.weights = std::move(r.converted.weights);
  if (ours) {
    // The metadata must describe the graph it came with: what both tell agrees.
    const model::ViTConfig& c = s.config;
    VIT_CHECK(static_cast<float>(c.eps) == static_cast<float>(r.converted.eps) &&
                  (c.mlp_layers == 1 || c.act == r.converted.act) && c.head_tanh == r.head_tanh &&
                  (r.converted.num_heads == 0 || r.converted.num_heads == c.num_heads),
              "onnx",
              "{}: metadata 'vit.config' (eps {:g}, {}, {} heads{}) does not describe the graph (eps {:g}, {}, {} "
              "heads{})",
              path, c.eps, c.act, c.num_heads, c.head_tanh ? ", tanh head" : "", r.converted.eps, r.converted.act,
              r.converted.num_heads, r.head_tanh ? ", tanh head" : "");
  } else {
    s.recorded_heads = r.converted.num_heads;
    const int64_t heads = options.num_heads > 0 ? options.num_heads : s.recorded_heads;
    s.config = model::infer_config(s.weights, model::Layout::Timm, heads, path);
    s.config.eps = r.converted.eps;
    s.config.act = r.converted.act;
    s.config.head_tanh = r.head_tanh;
    s.config.name = fmt::format("onnx-{}", d.layout);
    d.preprocess = default_preprocess(r.layout, r.converted.family, s.config);
  }
  if (r.in_channels > 0) {
    VIT_CHECK(r.in_channels == s.config.in_channels, "onnx", "{}: input has {} channels; the weights take {}", path,
              r.in_channels, s.config.in_channels);
  }
  if (r.image_size > 0) {
    VIT_CHECK(r.image_size == s.config.image_size, "onnx", "{}: input is {} pixels wide; the position table is for {}",
              path, r.image_size, s.config.image_size);
  }
  s.align_corners = r.layout == model::Layout::Torchvision;
  const std::string producer =
      ours ? "vit export" : "producer " + printable(m.producer_name + " " + m.producer_version);
  d.source_note = fmt::format("ONNX model ({}), {} recognised as a ViT: {}", producer,
                              ours ? "its metadata and graph" : "its graph", r.summary);
  return s;
}

}  // namespace vit::infer
