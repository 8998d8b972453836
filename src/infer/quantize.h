// Int8 models (`vit quantize`): every Linear weight of a ViT (qkv, proj, fc1, fc2, the head, the
// pre-logits layer) becomes int8 per output channel with a float32 scale (the scheme of
// kernels/int8_gemm.h); everything else (patch embedding, tokens, position embedding, LayerNorm,
// biases) stays float32. In a file: the int8 values under the weight's own (timm) name as an
// `I8` tensor, the scales as `<name>_scale` (`F32`, one per output channel), and the metadata
// entry "quantization": {"scheme": "vit-int8-1", "weights": ..., "activations": ...,
// "tensors": [the quantized weights' names]}. Reading checks each of these against the others.
#pragma once

#include <string>

#include "model/checkpoint_layout.h"
#include "model/vision_transformer.h"

namespace vit::infer {

inline constexpr const char* kQuantizationScheme = "vit-int8-1";
inline constexpr const char* kScaleSuffix = "_scale";

struct QuantizeSummary {
  int64_t tensors = 0;           // Linear weights quantized
  int64_t int8_values = 0;       // their elements
  int64_t float_values = 0;      // the parameters left in float32 (scales included)
  double max_abs_error = 0.0;    // largest |w - dequantised w| over all weights
  double max_rel_rms_error = 0;  // the largest per-tensor RMS error / RMS weight
};

// Quantizes every Linear of the model in place. Throws naming the tensor when a weight holds
// NaN/Inf or is all zeros, and when the model is already quantized.
QuantizeSummary quantize_linears(model::VisionTransformer& model);

bool is_quantized(const model::VisionTransformer& model);

// The metadata value describing the model's quantization ("" for a float model).
std::string quantization_metadata(const model::VisionTransformer& model);
// The scales to save beside the weights (name + kScaleSuffix), in module order.
model::NamedTensors quantization_scales(const model::VisionTransformer& model);

// Read side. Splits the scales (names ending in kScaleSuffix) out of `weights` and checks
// everything against `metadata` (the "quantization" value; "" when the file has none): each
// listed tensor is int8, holds values in [-63, 63], and has a float32 scale of one finite,
// positive value per row; no other tensor is int8 or a scale. Throws "[checkpoint] FILE: ..."
// naming the tensor. Returns the scales.
model::NamedTensors split_quantization(model::NamedTensors& weights, const std::string& metadata,
                                       const std::string& path);

// Makes the model's Linears named by the scales int8 (their weight an int8 tensor of the right
// shape, to be filled by load_state_dict; the scale attached), so the state dict loads into it.
void prepare_quantized(model::VisionTransformer& model, const model::NamedTensors& scales, const std::string& path);

}  // namespace vit::infer
