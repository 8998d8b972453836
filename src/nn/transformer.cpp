// ViT building blocks (see transformer.h).
#include "nn/transformer.h"

#include <fmt/ranges.h>

#include <cmath>

namespace vit::nn {

PatchEmbed::PatchEmbed(int64_t image_size_, int64_t patch_size_, int64_t in_channels_, int64_t embed_dim_,
                       Generator& gen, bool bias)
    : image_size(image_size_), patch_size(patch_size_), in_channels(in_channels_), embed_dim(embed_dim_) {
  VIT_CHECK(patch_size > 0 && image_size > 0 && image_size % patch_size == 0, "patch_embed",
            "image_size {} is not divisible by patch_size {}", image_size, patch_size);
  proj =
      register_module("proj", std::make_shared<Conv2d>(in_channels, embed_dim, patch_size, patch_size, 0, bias, gen));
}

Variable PatchEmbed::forward(const Variable& x) {
  VIT_CHECK(x.dim() == 4 && x.size(1) == in_channels, "patch_embed", "input {}: expected (B, {}, H, W)",
            shape_str(x.shape()), in_channels);
  VIT_CHECK(x.size(2) % patch_size == 0 && x.size(3) % patch_size == 0, "patch_embed",
            "input {}: height and width must be multiples of patch_size {}", shape_str(x.shape()), patch_size);
  return proj->forward(x).flatten(2).transpose(1, 2);  // (B, D, H/P, W/P) -> (B, N, D)
}

MultiHeadSelfAttention::MultiHeadSelfAttention(int64_t dim_, int64_t num_heads_, bool qkv_bias, double attn_drop_,
                                               double proj_drop_p, GeneratorPtr gen, int64_t head_dim_, bool qk_norm,
                                               double eps)
    : dim(dim_), num_heads(num_heads_), head_dim(head_dim_), attn_drop(attn_drop_), gen_(std::move(gen)) {
  VIT_CHECK(num_heads > 0 && dim > 0 && head_dim >= 0 && (head_dim > 0 || dim % num_heads == 0), "attention",
            "dim {} is not divisible by num_heads {}", dim, num_heads);
  if (head_dim == 0) head_dim = dim / num_heads;
  VIT_CHECK(attn_drop >= 0.0 && attn_drop <= 1.0, "attention", "attn_drop must be in [0, 1], got {}", attn_drop);
  VIT_CHECK(gen_ != nullptr, "attention", "a Generator is required (initialisation, dropout)");
  const int64_t A = num_heads * head_dim;
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * A, qkv_bias, *gen_));
  if (qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<LayerNorm>(Shape{head_dim}, eps));
    k_norm = register_module("k_norm", std::make_shared<LayerNorm>(Shape{head_dim}, eps));
  }
  proj = register_module("proj", std::make_shared<Linear>(A, dim, true, *gen_));
  proj_drop = std::make_shared<Dropout>(proj_drop_p, gen_);  // no parameters: not a named child in timm either
  register_module("proj_drop", proj_drop);
}

Variable MultiHeadSelfAttention::forward(const Variable& x) {
  VIT_CHECK(x.dim() == 3 && x.size(2) == dim, "attention", "input {}: expected (B, N, {})", shape_str(x.shape()), dim);
  Variable packed = qkv->forward(x);  // (B, N, 3A)
  if (q_norm) {
    // (B, N, 3, NH, HD): normalise q and k over each head's HD channels, v unchanged.
    const int64_t B = x.size(0), N = x.size(1);
    const Variable parts = packed.reshape({B, N, 3, num_heads, head_dim});
    const Variable q = q_norm->forward(parts.select(2, 0)), k = k_norm->forward(parts.select(2, 1));
    packed = stack({q, k, parts.select(2, 2)}, 2).reshape({B, N, 3 * num_heads * head_dim});
  }
  Variable heads = self_attention(packed, num_heads, attn_drop, is_training(), gen_.get(),
                                  keep_attention ? &last_attention : nullptr);  // (B, N, A)
  return proj_drop->forward(proj->forward(heads));                              // (B, N, D)
}

ActivationKind parse_activation(const std::string& name, const char* op) {
  for (const ActivationName& a : kActivationNames) {
    if (name == a.name) return a.kind;
  }
  fail(op, "act must be one of {}, got '{}'", fmt::join(activation_names(), ", "), name);
}

const char* activation_name(ActivationKind kind) {
  for (const ActivationName& a : kActivationNames) {
    if (kind == a.kind) return a.name;
  }
  return "?";
}

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (const ActivationName& a : kActivationNames) names.emplace_back(a.name);
  return names;
}

std::shared_ptr<Module> make_activation(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::Gelu:
      return std::make_shared<GELU>(false);
    case ActivationKind::GeluTanh:
      return std::make_shared<GELU>(true);
    case ActivationKind::QuickGelu:
      return std::make_shared<QuickGELU>();
    case ActivationKind::Relu:
      return std::make_shared<ReLU>();
  }
  fail("mlp", "unknown activation kind {}", static_cast<int>(kind));
}

Mlp::Mlp(int64_t in_features, int64_t hidden_features, int64_t out_features, double drop, GeneratorPtr gen,
         const std::string& act_)
    : activation(parse_activation(act_)) {
  VIT_CHECK(gen != nullptr, "mlp", "a Generator is required");
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, hidden_features, true, *gen));
  act = register_module("act", make_activation(activation));
  drop1 = register_module("drop1", std::make_shared<Dropout>(drop, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden_features, out_features, true, *gen));
  drop2 = register_module("drop2", std::make_shared<Dropout>(drop, gen));
}

Mlp::Mlp(int64_t in_features, int64_t out_features, GeneratorPtr gen) {
  VIT_CHECK(gen != nullptr, "mlp", "a Generator is required");
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, out_features, true, *gen));
}

Variable Mlp::forward(const Variable& x) {
  if (!fc2) return fc1->forward(x);
  return drop2->forward(fc2->forward(drop1->forward(act->forward(fc1->forward(x)))));
}

LayerScale::LayerScale(int64_t dim, double init_value) {
  VIT_CHECK(dim > 0 && std::isfinite(init_value), "layer_scale", "dim {} / init value {} invalid", dim, init_value);
  gamma = register_parameter("gamma", Tensor::full({dim}, init_value));
}

EncoderBlock::EncoderBlock(const EncoderBlockConfig& c, GeneratorPtr gen) : config(c) {
  VIT_CHECK(gen != nullptr, "encoder_block", "a Generator is required");
  VIT_CHECK(c.mlp_ratio > 0, "encoder_block", "mlp_ratio must be positive, got {}", c.mlp_ratio);
  const auto hidden = static_cast<int64_t>(std::llround(static_cast<double>(c.dim) * c.mlp_ratio));
  const Shape norm_shape = c.norm_shape.empty() ? Shape{c.dim} : c.norm_shape;
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(norm_shape, c.eps));
  attn =
      register_module("attn", std::make_shared<MultiHeadSelfAttention>(c.dim, c.num_heads, c.qkv_bias, c.attn_dropout,
                                                                       c.dropout, gen, c.head_dim, c.qk_norm, c.eps));
  if (c.layer_scale > 0) ls1 = register_module("ls1", std::make_shared<LayerScale>(c.dim, c.layer_scale));
  drop_path = register_module("drop_path", std::make_shared<DropPath>(c.drop_path, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(norm_shape, c.eps));
  VIT_CHECK(c.mlp_layers == 1 || c.mlp_layers == 2, "encoder_block", "mlp_layers must be 1 or 2, got {}", c.mlp_layers);
  mlp = register_module("mlp", c.mlp_layers == 1 ? std::make_shared<Mlp>(c.dim, c.dim, gen)
                                                 : std::make_shared<Mlp>(c.dim, hidden, c.dim, c.dropout, gen, c.act));
  if (c.layer_scale > 0) ls2 = register_module("ls2", std::make_shared<LayerScale>(c.dim, c.layer_scale));
}

Variable EncoderBlock::forward(const Variable& x) {
  Variable a = attn->forward(norm1->forward(x));  // (B, N, D)
  if (ls1) a = ls1->forward(a);
  Variable h = x + drop_path->forward(a);  // (B, N, D)
  Variable m = mlp->forward(norm2->forward(h));
  if (ls2) m = ls2->forward(m);
  return h + drop_path->forward(m);  // (B, N, D)
}

}  // namespace vit::nn
