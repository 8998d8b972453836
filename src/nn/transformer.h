// The ViT building blocks, named and initialised as in timm's vision_transformer.py:
//   PatchEmbed            x (B, C, H, W) -> proj Conv2d(k = s = P) -> (B, N, D), N = HW / P^2
//   MultiHeadSelfAttention (B, N, D) -> qkv Linear(D, 3A) -> [q_norm, k_norm per head] -> fused
//                         attention -> proj Linear(A, D); A = NH x HD (HD = D / NH unless given)
//   Mlp                   fc1 Linear(D, F) -> act -> Dropout -> fc2 Linear(F, D) -> Dropout
//                         (or, with one layer, fc1 Linear(D, D) alone: the ViT notebook)
//   LayerScale            x * gamma (D) (DeiT III, DINOv2: ls1, ls2)
//   EncoderBlock          x + DropPath(ls1(attn(norm1(x))));  x + DropPath(ls2(mlp(norm2(x))))  (pre-norm)
#pragma once

#include "nn/activation_kind.h"
#include "nn/layers.h"

namespace vit::nn {

class PatchEmbed : public Module {
 public:
  PatchEmbed(int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim, Generator& gen,
             bool bias = true);
  Variable forward(const Variable& x) override;  // (B, C, H, W) -> (B, N, D)
  int64_t image_size, patch_size, in_channels, embed_dim;
  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  std::shared_ptr<Conv2d> proj;
};

class MultiHeadSelfAttention : public Module {
 public:
  // head_dim 0: dim / num_heads. qk_norm: LayerNorm(head_dim, eps) on every head's q and k.
  MultiHeadSelfAttention(int64_t dim, int64_t num_heads, bool qkv_bias, double attn_drop, double proj_drop,
                         GeneratorPtr gen, int64_t head_dim = 0, bool qk_norm = false, double eps = 1e-6);
  Variable forward(const Variable& x) override;  // (B, N, D) -> (B, N, D)
  int64_t dim, num_heads, head_dim;
  double attn_drop;
  bool keep_attention = false;  // store the last forward's probabilities (B, NH, N, N) in last_attention
  Tensor last_attention;
  std::shared_ptr<Linear> qkv, proj;
  std::shared_ptr<LayerNorm> q_norm, k_norm;  // only with qk_norm
  std::shared_ptr<Dropout> proj_drop;

 private:
  GeneratorPtr gen_;
};

// An MLP activation module of that kind (nn/activation_kind.h names them).
std::shared_ptr<Module> make_activation(ActivationKind kind);

class Mlp : public Module {
 public:
  Mlp(int64_t in_features, int64_t hidden_features, int64_t out_features, double drop, GeneratorPtr gen,
      const std::string& act = "gelu");
  // One Linear(in, out) and nothing else (fc2, act undefined): the ViT notebook's block.
  Mlp(int64_t in_features, int64_t out_features, GeneratorPtr gen);
  Variable forward(const Variable& x) override;
  std::shared_ptr<Linear> fc1, fc2;  // fc2 null for a one-layer MLP
  std::shared_ptr<Module> act;       // null for a one-layer MLP
  ActivationKind activation = ActivationKind::Gelu;
  std::shared_ptr<Dropout> drop1, drop2;
};

class LayerScale : public Module {
 public:
  LayerScale(int64_t dim, double init_value);
  Variable forward(const Variable& x) override { return x * gamma; }  // (..., D) * (D)
  Variable gamma;
};

struct EncoderBlockConfig {
  int64_t dim = 192;
  int64_t num_heads = 3;
  double mlp_ratio = 4.0;
  bool qkv_bias = true;
  double dropout = 0.0;       // after the MLP's activation, its output and the attention projection
  double attn_dropout = 0.0;  // on attention probabilities
  double drop_path = 0.0;     // stochastic depth of both residual branches
  double eps = 1e-6;          // LayerNorm eps (timm's ViT uses 1e-6)
  int64_t head_dim = 0;       // 0: dim / num_heads
  bool qk_norm = false;
  std::string act = "gelu";
  double layer_scale = 0.0;  // > 0: ls1, ls2 with gammas initialised to it
  int64_t mlp_layers = 2;    // 1: mlp = one Linear(dim, dim)
  Shape norm_shape;          // the LayerNorms' normalized shape: empty = {dim}; {N, dim} for the notebook
};

class EncoderBlock : public Module {
 public:
  EncoderBlock(const EncoderBlockConfig& config, GeneratorPtr gen);
  Variable forward(const Variable& x) override;  // (B, N, D) -> (B, N, D)
  EncoderBlockConfig config;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<MultiHeadSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
  std::shared_ptr<LayerScale> ls1, ls2;  // only with layer_scale > 0
  std::shared_ptr<DropPath> drop_path;
};

}  // namespace vit::nn
