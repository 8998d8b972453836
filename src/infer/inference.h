// The inference path: a VisionTransformer's forward pass (eval mode) without the autograd
// graph. Same numbers as model(x) in eval mode (to float32 rounding), but
//  - no Variable/Node bookkeeping and no allocation per op: activations live in one arena,
//    sized on the first call and reused by later calls of the same or smaller batch;
//  - fused passes: bias + GELU, bias + residual (the GEMM accumulates into the residual
//    stream), position embedding + bias + CLS assembly, LayerNorm on only the pooled rows;
//  - attention split over (batch, head, query block) so batch 1 keeps every thread busy.
// Weights: every Linear (and the patch projection) is packed once, at construction, into the
// GEMM's panel layout (kernels/packed_gemm.h); the pages of the model's own copy are then handed
// back to the kernel (madvise MADV_PAGEOUT: a memory-mapped checkpoint's clean pages leave
// memory, so resident memory stays ~1x the weights; nothing is lost, a later read faults the page
// back in). Other parameters (norms, embeddings) are read in place.
// Works for float32 models; Session::supports() says whether a model can use it.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/vision_transformer.h"

namespace vit::infer {

class InferenceSession {
 public:
  // The model must outlive the session; its parameters are read at every call.
  explicit InferenceSession(const model::VisionTransformer& model);
  ~InferenceSession();
  static bool supports(const model::VisionTransformer& model);  // float32 parameters

  // images (B, C, H, W) float32 -> logits (B, num_classes).
  Tensor forward(const Tensor& images);
  // images -> pooled features before the head (B, dim or representation_size).
  Tensor forward_features(const Tensor& images);

 private:
  void run(const Tensor& images, bool with_head, Tensor& result);
  float* buffer(size_t index, size_t floats);
  struct Packed;  // the packed weights, by the model's weight pointer (inference.cpp)
  const model::VisionTransformer& model_;
  std::shared_ptr<const Packed> packed_;
  std::vector<std::vector<float>> buffers_;  // the arena: one vector per role, grown on demand
};

}  // namespace vit::infer
