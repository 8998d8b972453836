// `vit export`: any model vit loads (our checkpoints, int8 ones, every foreign layout, an ONNX file)
// as an ONNX model (ModelProto, ir_version 8), the same forward as the inference session:
//   input   "input" float32 (batch, C, H, W), preprocessed as metadata "vit.preprocess" says
//   outputs "logits" (batch, K) for a classifier (DeiT: the mean of its two heads), and
//           "embedding" (batch, E): the model's own pooling (CLIP: projected), what /v2 and
//           `vit embed` answer
// with a dynamic batch dimension ("batch"), standard ops only (ai.onnx, opset 13-17, 17 by
// default: LayerNormalization; below 17 its decomposition), the hybrid's BatchNorms folded into
// its convolutions, and metadata_props: vit.config (the architecture as checkpoints record it),
// vit.class_names (JSON), vit.preprocess (JSON), vit.family, vit.layout, vit.outputs. An int8
// model (or --precision int8) is written in ONNX Runtime's dynamic-quantization form
// (DynamicQuantizeLinear + MatMulInteger, per-channel int8 weights), which ORT fuses into
// DynamicQuantizeMatMul. Every model written passes ONNX's checker (libonnx) first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/load_model.h"

namespace vit::infer {

struct ExportOptions {
  int64_t opset = 17;  // 13..17
  bool int8 = false;   // quantize a float model's Linears first (vit quantize's scheme)
  // The int8 weights' bits when quantizing here: 7 by default ([-63, 63]), because ONNX Runtime's
  // u8s8 kernel on x86 CPUs without VNNI (AVX2: vpmaddubsw) saturates on full 8-bit weights (what
  // quantize_dynamic's reduce_range is for); 8 for machines with VNNI only.
  int bits = 7;
  bool overwrite = false;  // replace an existing output file
  // The weights in a file beside the model (OUT.data, ONNX's external data: each initializer's
  // bytes at a 64-byte-aligned offset) rather than inside it: always with external_data, and
  // whenever the model would pass 1.5 GiB (protobuf cannot hold a message over 2 GiB: ViT-H and up).
  bool external_data = false;
  // How the door names the output and the overwrite switch in messages (the CLI's; Python: "out",
  // "overwrite=True").
  std::string out_flag = "OUT", overwrite_flag = "--overwrite";
};

// "float32" -> false, "int8" -> true; else "[export] precision must be float32 or int8, got 'x'".
bool parse_export_int8(const std::string& precision);

struct ExportResult {
  std::string layout, family, precision;  // precision: "float32" or "int8"
  int weight_bits = 0;                    // int8: 7 or 8
  std::vector<std::string> outputs;       // "logits", "embedding"
  int64_t nodes = 0, initializers = 0, quantized_linears = 0;
  uint64_t bytes = 0;
  std::string data_file;  // the external data file written ("" if none)
  uint64_t data_bytes = 0;
  double seconds = 0;
};

// The ModelProto of a loaded model, serialised and checked (throws "[export] ..." naming what is
// refused: an opset out of range). With `external` (and options.external_data, or a model over
// 1.5 GiB), the initializers' bytes go to *external instead, named `location` in the model; without
// it, such a model is refused.
std::string onnx_model_bytes(const LoadedModel& m, const ExportOptions& options, ExportResult* result = nullptr,
                             std::string* external = nullptr, const std::string& location = "");

// Loads `in` (as vit predict would) and writes `out` whole or not at all.
ExportResult export_onnx(const std::string& in, const std::string& out, const LoadSettings& load,
                         const ExportOptions& options);

}  // namespace vit::infer
