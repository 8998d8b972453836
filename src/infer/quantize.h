// Int8 models (`vit quantize`): every Linear weight of a ViT (qkv, proj, fc1, fc2, the head, the
// pre-logits layer) becomes int8 per output channel with a float32 scale (the schemes of
// kernels/gemm/int8_gemm.h: 8-bit weights by default, 7-bit ones on request); everything else (patch embedding, tokens,
// position embedding, LayerNorm, biases) stays float32. How such a model is written to and read from a file (metadata,
// scales, checks) is the checkpoint room's: checkpoint/int8_format.h.
#pragma once

#include <cstdint>

#include "checkpoint/int8_format.h"
#include "model/vision_transformer.h"

namespace vit::infer {

struct QuantizeSummary {
  int64_t tensors = 0;           // Linear weights quantized
  int64_t int8_values = 0;       // their elements
  int64_t float_values = 0;      // the parameters left in float32 (scales included)
  double max_abs_error = 0.0;    // largest |w - dequantised w| over all weights
  double max_rel_rms_error = 0;  // the largest per-tensor RMS error / RMS weight
  int bits = 8;                  // the weights' bits (8: [-127, 127], 7: [-63, 63])
};

// Quantizes every Linear of the model in place to `bits`-bit weights (8 or 7). Throws naming the
// tensor when a weight holds NaN/Inf or is all zeros, and when the model is already quantized.
QuantizeSummary quantize_linears(model::VisionTransformer& model, int bits = 8);

}  // namespace vit::infer
