// The inference session's forward as named stages (as gemma.cpp writes its ViT:
// EmbedImagePatches, VitTransformerLayer, FFWVit), each reading its resolved weights
// (session_weights.h) and writing the named buffers of one Activations arena. The order, beside
// the graph model (model/vision_transformer.h):
//   embed_image_patches   [stem | backbone] -> im2row + GEMM -> tokens = [prefix; patches] + pos -> [norm_pre]
//   vit_transformer_layer x += [ls1] proj(attn(norm1(x))), then ffw_vit: x += [ls2] mlp(norm2(x))
//   final_tokens          the token sequence after the final norm (B, N, D)
//   pool_features         class row(s) after norm, or the patch mean then fc_norm -> [pre_logits]
//   classifier_head       head (DeiT: the mean of head and head_dist) [+ tanh]
// Every elementwise loop is a kernel (kernels/fused.h, kernels/linear.h epilogues).
#pragma once

#include <cstdint>
#include <vector>

#include "infer/request.h"
#include "infer/session_weights.h"
#include "model/vit_config.h"

namespace vit::infer {

// The sizes of one call.
struct VitDims {
  int64_t B, N, D, F, H, A, HD, prefix, rows;  // rows = B N
  bool norm_tokens;                            // block norms over an image's N x D values
  VitDims(const model::ViTConfig& c, int64_t batch);
};

// The arena: one vector per role, grown on demand and reused by later calls.
struct Activations {
  std::vector<float> rows;         // im2row rows (B HW, 9 S) or (B P, C P P)
  std::vector<float> stem_pixels;  // a stem layer's output (B, HW, S)
  std::vector<float> stem_planes;  // ... as planes (B, S, H, W)
  std::vector<float> map_in;       // a hybrid's backbone: a block's input map (B, h, w, C), then the last one
  std::vector<float> map_mid;      // ... its first convolution's output
  std::vector<float> map_out;      // ... its output (swapped into map_in)
  std::vector<float> x;            // the residual stream (B, N, D)
  std::vector<float> h;            // patch embeddings (B, P, D), then LayerNorm outputs (B, N, D)
  std::vector<float> qkv;          // (B, N, 3A)
  std::vector<float> attn;         // (B, N, A)
  std::vector<float> hidden;       // the MLP's (B, N, F)
  std::vector<float> branch;       // a LayerScale'd branch before its gamma (B, N, D)
  std::vector<float> pooled;       // (B, 2, D): class [and distillation] rows, or the patch mean
  std::vector<float> features;     // (B, representation_size) after pre_logits

  // buffer resized to at least floats.
  static float* sized(std::vector<float>& buffer, int64_t floats);
};

// x (B, N, D) from images (B, C, H, W) float32.
void embed_image_patches(const SessionWeights& w, const model::ViTConfig& c, const VitDims& d, const float* images,
                         Activations& act);

// One encoder block on x, in place (attention, then ffw_vit).
void vit_transformer_layer(const LayerWeights& w, const VitDims& d, Activations& act);

// The block's MLP branch on x, in place: x += [ls2] fc2(act(fc1(norm2(x)))).
void ffw_vit(const LayerWeights& w, const VitDims& d, Activations& act);

// out (B, N, D) = the final norm of x (a copy without one).
void final_tokens(const SessionWeights& w, const VitDims& d, const Activations& act, float* out);

// The pooled features (Pool::Cls or Pool::Avg): returns (data, width), a view into act. With
// keep_distilled (a DeiT model's logits), the class and distillation rows stay apart in
// act.pooled (B, 2, D) and the result is that buffer with width D per row pair.
struct Features {
  const float* data;
  int64_t width;
};
Features pool_features(const SessionWeights& w, const VitDims& d, Pool pool, bool keep_distilled, Activations& act);

// logits (B, K) from the features; with head_dist (keep_distilled pooled rows), the mean of the
// two heads. head_tanh: the ViT notebook's tanh(head(x)).
void classifier_head(const SessionWeights& w, const VitDims& d, const Features& f, bool distilled, bool head_tanh,
                     float* logits);

}  // namespace vit::infer
