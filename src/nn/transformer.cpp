// ViT building blocks (see transformer.h).
#include "nn/transformer.h"

#include <cmath>

namespace vit::nn {

PatchEmbed::PatchEmbed(int64_t image_size_, int64_t patch_size_, int64_t in_channels_, int64_t embed_dim_,
                       Generator& gen)
    : image_size(image_size_), patch_size(patch_size_), in_channels(in_channels_), embed_dim(embed_dim_) {
  VIT_CHECK(patch_size > 0 && image_size > 0 && image_size % patch_size == 0, "patch_embed",
            "image_size {} is not divisible by patch_size {}", image_size, patch_size);
  proj =
      register_module("proj", std::make_shared<Conv2d>(in_channels, embed_dim, patch_size, patch_size, 0, true, gen));
}

Variable PatchEmbed::forward(const Variable& x) {
  VIT_CHECK(x.dim() == 4 && x.size(1) == in_channels, "patch_embed", "input {}: expected (B, {}, H, W)",
            shape_str(x.shape()), in_channels);
  VIT_CHECK(x.size(2) % patch_size == 0 && x.size(3) % patch_size == 0, "patch_embed",
            "input {}: height and width must be multiples of patch_size {}", shape_str(x.shape()), patch_size);
  return proj->forward(x).flatten(2).transpose(1, 2);  // (B, D, H/P, W/P) -> (B, N, D)
}

MultiHeadSelfAttention::MultiHeadSelfAttention(int64_t dim_, int64_t num_heads_, bool qkv_bias, double attn_drop_,
                                               double proj_drop_p, GeneratorPtr gen)
    : dim(dim_), num_heads(num_heads_), attn_drop(attn_drop_), gen_(std::move(gen)) {
  VIT_CHECK(num_heads > 0 && dim > 0 && dim % num_heads == 0, "attention", "dim {} is not divisible by num_heads {}",
            dim, num_heads);
  VIT_CHECK(attn_drop >= 0.0 && attn_drop <= 1.0, "attention", "attn_drop must be in [0, 1], got {}", attn_drop);
  VIT_CHECK(gen_ != nullptr, "attention", "a Generator is required (initialisation, dropout)");
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias, *gen_));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim, true, *gen_));
  proj_drop = std::make_shared<Dropout>(proj_drop_p, gen_);  // no parameters: not a named child in timm either
  register_module("proj_drop", proj_drop);
}

Variable MultiHeadSelfAttention::forward(const Variable& x) {
  VIT_CHECK(x.dim() == 3 && x.size(2) == dim, "attention", "input {}: expected (B, N, {})", shape_str(x.shape()), dim);
  Variable packed = qkv->forward(x);  // (B, N, 3D)
  Variable heads = self_attention(packed, num_heads, attn_drop, is_training(), gen_.get(),
                                  keep_attention ? &last_attention : nullptr);  // (B, N, D)
  return proj_drop->forward(proj->forward(heads));                              // (B, N, D)
}

Mlp::Mlp(int64_t in_features, int64_t hidden_features, int64_t out_features, double drop, GeneratorPtr gen,
         bool tanh_gelu) {
  VIT_CHECK(gen != nullptr, "mlp", "a Generator is required");
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, hidden_features, true, *gen));
  act = register_module("act", std::make_shared<GELU>(tanh_gelu));
  drop1 = register_module("drop1", std::make_shared<Dropout>(drop, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden_features, out_features, true, *gen));
  drop2 = register_module("drop2", std::make_shared<Dropout>(drop, gen));
}

Variable Mlp::forward(const Variable& x) {
  return drop2->forward(fc2->forward(drop1->forward(act->forward(fc1->forward(x)))));
}

EncoderBlock::EncoderBlock(const EncoderBlockConfig& c, GeneratorPtr gen) : config(c) {
  VIT_CHECK(gen != nullptr, "encoder_block", "a Generator is required");
  VIT_CHECK(c.mlp_ratio > 0, "encoder_block", "mlp_ratio must be positive, got {}", c.mlp_ratio);
  const auto hidden = static_cast<int64_t>(std::llround(static_cast<double>(c.dim) * c.mlp_ratio));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{c.dim}, c.eps));
  attn = register_module(
      "attn", std::make_shared<MultiHeadSelfAttention>(c.dim, c.num_heads, c.qkv_bias, c.attn_dropout, c.dropout, gen));
  drop_path = register_module("drop_path", std::make_shared<DropPath>(c.drop_path, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{c.dim}, c.eps));
  mlp = register_module("mlp", std::make_shared<Mlp>(c.dim, hidden, c.dim, c.dropout, gen));
}

Variable EncoderBlock::forward(const Variable& x) {
  Variable h = x + drop_path->forward(attn->forward(norm1->forward(x)));  // (B, N, D)
  return h + drop_path->forward(mlp->forward(norm2->forward(h)));         // (B, N, D)
}

}  // namespace vit::nn
