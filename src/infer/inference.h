// The inference path: a VisionTransformer's forward pass (eval mode) without the autograd
// graph. Same numbers as model(x) in eval mode (to float32 rounding), but
//  - no Variable/Node bookkeeping and no allocation per op: activations live in one arena
//    (vit_stages.h: Activations), sized on the first call and reused by later calls of the same
//    or smaller batch;
//  - the forward written as named stages (vit_stages.h: embed_image_patches,
//    vit_transformer_layer, ffw_vit, pooling, head) over weights resolved once
//    (session_weights.h: one struct per layer, the MLP activation an enum);
//  - a convolutional stem (if any) as im2row + GEMM with bias and GELU fused;
//  - fused passes: bias + GELU, bias + residual (the GEMM accumulates into the residual
//    stream), position embedding + bias + CLS assembly, LayerNorm on only the pooled rows;
//  - attention split over (batch, head, query block) so batch 1 keeps every thread busy.
// Weights: every Linear (and the patch projection) is packed once, at construction, into the
// GEMM's panel layout (kernels/gemm/packed_gemm.h). With WeightPages::Release, the model's own copy
// of each packed weight, where it is a memory-mapped checkpoint (Tensor::is_file_mapped), is then
// dropped from this process (madvise MADV_DONTNEED): resident memory stays ~1x the weights, and
// the file's pages stay in the page cache for the next load. Only for a model nobody modified
// since it was loaded (a private mapping's modified pages would be dropped too; a later read of
// an untouched page faults it back in from the file). Other parameters are read in place.
// int8 Linears (infer/quantize.h) run the int8 kernel (kernels/gemm/int8_gemm.h): their activations
// are quantized per row as the kernel packs them, and dequantisation, bias, GELU and the residual
// addition happen in its store; LayerNorm, softmax, attention and the residual stream stay
// float32. Works for float32 and int8 models; Session::supports() says whether a model can use it.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "infer/request.h"
#include "model/vision_transformer.h"

namespace vit::infer {

struct SessionWeights;
struct Activations;

class InferenceSession {
 public:
  // The model must outlive the session. Its weights are resolved (Linears packed) here: a session
  // sees the model as it was when it was created (make a new one after changing or reloading
  // its parameters); the other parameters are read in place at every call.
  // Keep: read the model's memory as it is; Release: drop the pages of each packed weight where they
  // are a memory-mapped checkpoint; Own: Release, and copy every other mapped parameter the session
  // reads, so that after construction it never reads the file (a server whose checkpoint is
  // rewritten or truncated on disk keeps serving the weights it loaded).
  enum class WeightPages { Keep, Release, Own };
  // precision BF16: the float32 Linear layers run in bfloat16 (kernels/gemm/bf16_gemm.h); int8 ones stay int8.
  explicit InferenceSession(const model::VisionTransformer& model, WeightPages pages = WeightPages::Keep,
                            Precision precision = Precision::F32);
  ~InferenceSession();
  static bool supports(const model::VisionTransformer& model);  // float32 parameters

  // images (B, C, H, W) float32 -> logits (B, num_classes) (a model without a head refuses).
  Tensor forward(const Tensor& images);
  // images -> pooled features before the head (B, dim or representation_size).
  Tensor forward_features(const Tensor& images);
  // What `vit embed` writes: pool "tokens" gives the final token sequence (B, N, D) (after the
  // final norm); "cls" / "avg" (VisionTransformer::pool_tokens) the pooled features, through the
  // representation layer if any, and through the projection of a CLIP model (B, E).
  Tensor embed(const Tensor& images, Pool pool);

  // The resolved weights the stages read (infer/session_gemms.h lists a forward's GEMMs on them).
  const SessionWeights& weights() const;

 private:
  enum class Result { Logits, Features, Tokens, Embedding };
  Tensor run(const Tensor& images, Result result, Pool pool);
  const model::VisionTransformer& model_;
  Pool model_pool_;  // the config's pooling (cls, or the patch mean)
  std::shared_ptr<const SessionWeights> weights_;
  std::unique_ptr<Activations> activations_;
};

}  // namespace vit::infer
