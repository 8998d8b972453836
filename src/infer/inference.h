// The inference path: a VisionTransformer's forward pass (eval mode) without the autograd
// graph. Same numbers as model(x) in eval mode (to float32 rounding), but
//  - no Variable/Node bookkeeping and no allocation per op: activations live in one arena,
//    sized on the first call and reused by later calls of the same or smaller batch;
//  - fused passes: bias + GELU, bias + residual (the GEMM accumulates into the residual
//    stream), position embedding + bias + CLS assembly, LayerNorm on only the pooled rows;
//  - attention split over (batch, head, query block) so batch 1 keeps every thread busy.
// Weights are read in place from the model's parameters (which may be memory-mapped).
// Works for float32 models; Session::supports() says whether a model can use it.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "model/vision_transformer.h"

namespace vit::infer {

class InferenceSession {
 public:
  // The model must outlive the session; its parameters are read at every call.
  explicit InferenceSession(const model::VisionTransformer& model);
  static bool supports(const model::VisionTransformer& model);  // float32 parameters

  // images (B, C, H, W) float32 -> logits (B, num_classes).
  Tensor forward(const Tensor& images);
  // images -> pooled features before the head (B, dim or representation_size).
  Tensor forward_features(const Tensor& images);

 private:
  void run(const Tensor& images, bool with_head, Tensor& result);
  float* buffer(size_t index, size_t floats);
  const model::VisionTransformer& model_;
  std::vector<std::vector<float>> buffers_;  // the arena: one vector per role, grown on demand
};

}  // namespace vit::infer
