// The inference session's weights, resolved once when the session is made (as gemma.cpp's
// per-layer weight structs): every Linear of the forward packed for its kernel (float32 into the
// packed GEMM's panels where the CPU has AVX2, int8 ones for the int8 kernel on any CPU, else the
// model's own matrix read in place), every other parameter as a pointer into the model, and each
// block's MLP activation as an enum. The stages (vit_stages.h) read only these structs.
// With release, each packed weight's original pages, where they are a memory-mapped checkpoint, are
// dropped from this process; owning also copies the rest (see inference.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm/bf16_gemm.h"
#include "kernels/gemm/epilogue.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/gemm/packed_gemm.h"
#include "model/vision_transformer.h"

namespace vit::infer {

// One Linear (or a convolution as a GEMM): y (rows, out) = epilogue(x (rows, in) @ W^T + bias).
struct LinearWeights {
  int64_t in = 0, out = 0;
  const float* bias = nullptr;                          // (out) or null
  const float* weight = nullptr;                        // (out, in), read in place when not packed
  std::shared_ptr<const kernels::PackedMatrix> packed;  // float32, packed once
  std::shared_ptr<const kernels::Int8Matrix> int8;      // an int8 Linear
  std::shared_ptr<const kernels::Bf16Matrix> bf16;      // float32 weights run in bfloat16
  explicit operator bool() const { return out > 0; }
  void forward(const float* x, int64_t rows, float* y, const kernels::Epilogue& epilogue) const;
};

// A LayerNorm's affine parameters (null without them: absent norm).
struct NormWeights {
  const float* weight = nullptr;
  const float* bias = nullptr;
  double eps = 1e-5;
  bool present = false;
  explicit operator bool() const { return present; }
  // y (rows, n) = LayerNorm(x) over each row of n (in place allowed).
  void forward(const float* x, float* y, int64_t rows, int64_t n) const;
};

// The MLP activations (nn::make_activation's names); GELU is fused into fc1's GEMM store.
enum class MlpActivation { Gelu, GeluTanh, QuickGelu, Relu };

// One encoder block (pre-norm): x += [ls1] proj(attn(norm1(x))); x += [ls2] mlp(norm2(x)).
struct LayerWeights {
  NormWeights norm1, norm2;
  NormWeights q_norm, k_norm;  // per head, over HD channels (qk_norm models)
  LinearWeights qkv, proj;
  LinearWeights fc1, fc2;  // fc2 absent: a one-Linear MLP (D -> D)
  MlpActivation activation = MlpActivation::Gelu;
  const float* ls1 = nullptr;  // LayerScale gammas (D), or null
  const float* ls2 = nullptr;
};

// A stem layer: Conv2d(3x3, stride 1, padding 1) as im2row + GEMM, with GELU fused.
struct StemLayerWeights {
  LinearWeights conv;  // (out_channels, in_channels x 9)
  int64_t in_channels = 0, out_channels = 0;
  kernels::Epilogue epilogue;
};

// A hybrid's convolution with the BatchNorm after it folded in: W' = W * g, b' = beta - mean * g
// with g = gamma / sqrt(running_var + eps), as im2row + GEMM. The first one (the stem) reads the
// image's planes, its weight in (c, kh, kw) order; the others read channels-last maps (B, H, W, C),
// their weights permuted to (kh, kw, c) order (kernels::im2row_nhwc).
// Where the GEMM is float32 (not a bfloat16 session), the same folded weight in (O, KH, KW, C) order
// runs the direct convolution instead (kernels/conv/direct_conv.h: no im2row; the stem's planes are
// made channels-last first when the image has more than one channel).
struct ConvWeights {
  LinearWeights gemm;             // (out_channels, k x k x in_channels)
  const float* direct = nullptr;  // (out_channels, k, k, in_channels), or null: im2row + the GEMM
  int64_t in_channels = 0, out_channels = 0, kernel = 0, stride = 1;
  explicit operator bool() const { return static_cast<bool>(gemm); }
};
// A residual block: out = relu(conv2(relu(conv1(x))) + downsample(x) or x).
struct ConvBlockWeights {
  ConvWeights conv1, conv2, downsample;  // downsample absent: the identity shortcut
};
struct BackboneWeights {
  ConvWeights stem;
  std::vector<ConvBlockWeights> blocks;  // every stage's, in order
  explicit operator bool() const { return static_cast<bool>(stem); }
};

struct SessionWeights {
  std::vector<StemLayerWeights> stem;
  BackboneWeights backbone;               // a hybrid's (its patch weight then in (kh, kw, c) order)
  LinearWeights patch;                    // the patch projection (D, C x P x P)
  std::vector<const float*> prefix_rows;  // [cls] [dist] [reg x R], each (D)
  bool dist_token = false;                // a distilled model's second prefix row
  const float* pos = nullptr;             // position table
  NormWeights norm_pre;
  std::vector<LayerWeights> layers;
  NormWeights norm, fc_norm;
  LinearWeights pre_logits;  // representation layer (then tanh), or absent
  LinearWeights head, head_dist;

  // release: drop each packed weight's mapped pages; own: also copy every other memory-mapped
  // parameter the session reads, so that it never reads the checkpoint's file again.
  // bf16: float32 Linear weights are converted to bfloat16 once and run by kernels/gemm/bf16_gemm.h.
  SessionWeights(const model::VisionTransformer& model, bool release, bool own = false, bool bf16 = false);
  std::vector<std::unique_ptr<float[]>> owned;  // the copies (own)
  std::vector<Tensor> folded;                   // the backbone's folded weights and biases
};

}  // namespace vit::infer
