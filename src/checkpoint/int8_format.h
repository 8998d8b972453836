// The int8 model (infer/quantize.h makes one) in a file: the int8 values under the weight's own
// (timm) name as an `I8` tensor, the scales as `<name>_scale` (`F32`, one per output channel), and
// the metadata entry "quantization": {"scheme": "vit-int8-2", "weights": ..., "activations": ...,
// "tensors": [the quantized weights' names]}. The scheme says the weights' range: vit-int8-2 8-bit
// ([-127, 127], what vit quantize writes by default), vit-int8-1 7-bit ([-63, 63], older files and
// --bits 7); both load. Reading checks each of these against the others.
// Part of the checkpoint format (checkpoint.h writes and reads it; infer/own_checkpoint.cpp too).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/layouts/layout.h"
#include "model/vision_transformer.h"
#include "nn/layers.h"

namespace vit::checkpoint {

inline constexpr const char* kQuantizationScheme7 = "vit-int8-1";  // 7-bit weights
inline constexpr const char* kQuantizationScheme8 = "vit-int8-2";  // 8-bit weights
inline constexpr const char* kScaleSuffix = "_scale";

// Every Linear below the module, with its dotted name, in module order.
std::vector<std::pair<std::string, nn::Linear*>> named_linears(const nn::Module& root);

bool is_quantized(const model::VisionTransformer& model);

// The weight bits (7 or 8) of the "quantization" metadata value (0 for ""); throws naming the path
// for an unknown scheme or a value that is not JSON.
int quantization_bits(const std::string& metadata, const std::string& path);

// The metadata value describing the model's quantization ("" for a float model; its quantized
// Linears must share one weight_bits).
std::string quantization_metadata(const model::VisionTransformer& model);
// The scales to save beside the weights (name + kScaleSuffix), in module order.
model::NamedTensors quantization_scales(const model::VisionTransformer& model);

// Read side. Splits the scales (names ending in kScaleSuffix) out of `weights` and checks
// everything against `metadata` (the "quantization" value; "" when the file has none): each
// listed tensor is int8, holds values in the scheme's range, and has a float32 scale of one finite,
// positive value per row; no other tensor is int8 or a scale. Throws "[checkpoint] FILE: ..."
// naming the tensor. Returns the scales.
model::NamedTensors split_quantization(model::NamedTensors& weights, const std::string& metadata,
                                       const std::string& path);

// Makes the model's Linears named by the scales int8 (their weight an int8 tensor of the right
// shape, to be filled by load_state_dict; the scale and the scheme's weight bits attached), so the
// state dict loads into it.
void prepare_quantized(model::VisionTransformer& model, const model::NamedTensors& scales, int bits,
                       const std::string& path);

}  // namespace vit::checkpoint
