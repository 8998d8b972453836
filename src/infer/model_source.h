// The two ways into load_model (infer/load_model.h), each reading a weights file into one source:
//   - own_checkpoint_source: a checkpoint written by vit (train, quantize, convert): the config,
//     class names, preprocessing and int8 scales are all in its metadata;
//   - foreign_source: timm / torchvision / Hugging Face / JAX weights in any file format: the
//     layout detected (or forced), the keys renamed to timm's (model/layouts), the config inferred
//     from the shapes, the family's own preprocessing.
// load_model then applies the overrides, resamples the position table and builds the model, the
// same way for both.
#pragma once

#include <map>
#include <string>

#include "infer/load_model.h"
#include "io/onnx.h"
#include "io/weights.h"

namespace vit::infer {

struct ModelSource {
  model::ViTConfig config;
  model::NamedTensors weights;                     // timm's names
  model::NamedTensors scales;                      // an int8 model's weight scales
  bool align_corners = false;                      // torchvision resamples pos_embed with align_corners
  std::map<std::string, std::string> source_keys;  // a foreign file's key of each timm name (for errors)
  // What the file records of the architecture, which a load option may not contradict: our
  // checkpoints record their whole config (heads, eps, activation); a foreign file may record its
  // head count (metadata "num_heads", or JAX's query kernel shape); 0: nothing recorded.
  bool records_config = false;
  int64_t recorded_heads = 0;
  // What the file told besides weights (layout, family, format, notes, class names, preprocessing,
  // keys not used...); its model is built last, by load_model.
  LoadedModel described;
};

ModelSource own_checkpoint_source(const io::WeightsFile& file, const LoadSettings& options);
ModelSource foreign_source(const io::WeightsFile& file, const LoadSettings& options);
// An ONNX model (io/onnx.h) whose graph model/layouts/onnx.h recognises as a ViT: the weights from
// the pattern; the config, class names and preprocessing from vit export's metadata, or else
// inferred from the shapes with the preprocessing of the exporter whose names the weights carry.
ModelSource onnx_source(const io::OnnxModel& m, const LoadSettings& options);

// A foreign layout's evaluation transform (its family's, else the layout's as each publishes it).
Preprocess default_preprocess(model::Layout layout, model::Family family, const model::ViTConfig& c);

}  // namespace vit::infer
