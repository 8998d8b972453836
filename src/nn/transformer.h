// The ViT building blocks, named and initialised as in timm's vision_transformer.py:
//   PatchEmbed            x (B, C, H, W) -> proj Conv2d(k = s = P) -> (B, N, D), N = HW / P^2
//   MultiHeadSelfAttention (B, N, D) -> qkv Linear(D, 3D) -> fused attention -> proj Linear(D, D)
//   Mlp                   fc1 Linear(D, F) -> GELU -> Dropout -> fc2 Linear(F, D) -> Dropout
//   EncoderBlock          x + DropPath(attn(norm1(x)));  x + DropPath(mlp(norm2(x)))  (pre-norm)
#pragma once

#include "nn/layers.h"

namespace vit::nn {

class PatchEmbed : public Module {
 public:
  PatchEmbed(int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim, Generator& gen);
  Variable forward(const Variable& x) override;  // (B, C, H, W) -> (B, N, D)
  int64_t image_size, patch_size, in_channels, embed_dim;
  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  std::shared_ptr<Conv2d> proj;
};

class MultiHeadSelfAttention : public Module {
 public:
  MultiHeadSelfAttention(int64_t dim, int64_t num_heads, bool qkv_bias, double attn_drop, double proj_drop,
                         GeneratorPtr gen);
  Variable forward(const Variable& x) override;  // (B, N, D) -> (B, N, D)
  int64_t dim, num_heads;
  double attn_drop;
  bool keep_attention = false;  // store the last forward's probabilities (B, NH, N, N) in last_attention
  Tensor last_attention;
  std::shared_ptr<Linear> qkv, proj;
  std::shared_ptr<Dropout> proj_drop;

 private:
  GeneratorPtr gen_;
};

class Mlp : public Module {
 public:
  Mlp(int64_t in_features, int64_t hidden_features, int64_t out_features, double drop, GeneratorPtr gen,
      bool tanh_gelu = false);
  Variable forward(const Variable& x) override;
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<GELU> act;
  std::shared_ptr<Dropout> drop1, drop2;
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
};

class EncoderBlock : public Module {
 public:
  EncoderBlock(const EncoderBlockConfig& config, GeneratorPtr gen);
  Variable forward(const Variable& x) override;  // (B, N, D) -> (B, N, D)
  EncoderBlockConfig config;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<MultiHeadSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
  std::shared_ptr<DropPath> drop_path;
};

}  // namespace vit::nn
