// Fuzz target: an ONNX model from bytes: the protobuf (libonnx's classes), every tensor's type,
// dims and data size checked before it is read, then the ViT pattern (model/layouts/onnx.h) and the
// model source it makes (config from the shapes or from vit export's metadata). External data is
// refused from memory (no folder to read it from).
#include "fuzz_target.h"
#include "infer/model_source.h"
#include "io/onnx.h"

namespace {

void read_model(const uint8_t* data, size_t size) {
  const vit::io::OnnxModel m = vit::io::parse_onnx(data, size, "fuzz.onnx");
  const vit::infer::ModelSource s = vit::infer::onnx_source(m, {});
  s.config.validate();
}

}  // namespace

VIT_FUZZ_TARGET(read_model(data, size))
