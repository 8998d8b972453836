// ViTConfig validation, JSON and architecture comparison (see vit_config.h; the presets are in
// presets.cpp).
#include "model/vit_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "nn/activation_kind.h"

namespace vit::model {

PoolKind parse_pool_kind(const std::string& name, const char* op) {
  for (const PoolName& p : kPoolNames) {
    if (name == p.name) return p.kind;
  }
  fail(op, "pool must be 'cls', 'avg' (class token kept, patch mean) or 'mean' (no class token), got '{}'", name);
}

const char* pool_kind_name(PoolKind kind) {
  for (const PoolName& p : kPoolNames) {
    if (kind == p.kind) return p.name;
  }
  return "?";
}

int64_t ViTConfig::hidden_dim() const {
  return mlp_dim > 0 ? mlp_dim : static_cast<int64_t>(std::llround(static_cast<double>(dim) * mlp_ratio));
}

void ViTConfig::validate() const {
  const char* op = "vit_config";
  VIT_CHECK(image_size > 0 && patch_size > 0, op, "image_size {} and patch_size {} must be positive", image_size,
            patch_size);
  VIT_CHECK(image_size % patch_size == 0, op, "image_size {} is not divisible by patch_size {}", image_size,
            patch_size);
  VIT_CHECK(in_channels > 0, op, "in_channels must be positive, got {}", in_channels);
  VIT_CHECK(num_classes >= 0, op, "num_classes must be >= 0 (0: no head, features only), got {}", num_classes);
  VIT_CHECK(dim > 0 && depth > 0 && num_heads > 0, op, "dim {}, depth {}, num_heads {} must be positive", dim, depth,
            num_heads);
  VIT_CHECK(dim_head >= 0 && dim_head <= 65536, op, "dim_head must be in [0, 65536] (0: dim / num_heads), got {}",
            dim_head);
  VIT_CHECK(dim_head > 0 || dim % num_heads == 0, op, "dim {} is not divisible by num_heads {} (or set dim_head)", dim,
            num_heads);
  VIT_CHECK(mlp_dim > 0 || mlp_ratio > 0, op, "mlp_ratio must be positive, got {}", mlp_ratio);
  VIT_CHECK(mlp_dim >= 0, op, "mlp_dim must be >= 0, got {}", mlp_dim);
  for (auto [field, p] : {std::pair{"dropout", dropout}, {"attn_dropout", attn_dropout}, {"drop_path", drop_path}}) {
    VIT_CHECK(p >= 0.0 && p < 1.0, op, "{} must be in [0, 1), got {}", field, p);
  }
  const PoolKind pooling = parse_pool_kind(pool, op);
  VIT_CHECK(reg_tokens >= 0 && reg_tokens <= 256, op, "reg_tokens must be in [0, 256], got {}", reg_tokens);
  VIT_CHECK(!dist_token || pooling == PoolKind::Cls, op,
            "a distillation token needs pool 'cls' (DeiT pools both tokens), got '{}'", pool);
  VIT_CHECK(!dist_token || (num_classes > 0 && representation_size == 0), op,
            "a distillation token needs a classifier head (num_classes > 0) and no representation layer");
  (void)nn::parse_activation(act, op);
  VIT_CHECK(std::isfinite(layer_scale) && layer_scale >= 0.0, op, "layer_scale must be a finite number >= 0, got {}",
            layer_scale);
  VIT_CHECK(mlp_layers == 1 || mlp_layers == 2, op,
            "mlp_layers must be 2 (fc1, act, fc2) or 1 (one Linear(dim, dim)), got {}", mlp_layers);
  VIT_CHECK(!projection || (num_classes > 0 && !dist_token && representation_size == 0), op,
            "a projection head needs num_classes > 0 (the embedding width), no distillation token and no "
            "representation layer");
  VIT_CHECK(!head_tanh || num_classes > 0, op, "head_tanh needs a head (num_classes > 0)");
  VIT_CHECK(eps > 0.0, op, "eps must be positive, got {}", eps);
  VIT_CHECK(representation_size >= 0, op, "representation_size must be >= 0, got {}", representation_size);
  VIT_CHECK(stem_layers >= 0 && stem_layers <= 8, op, "stem_layers must be in [0, 8], got {}", stem_layers);
  VIT_CHECK(stem_layers == 0 ? stem_channels == 0 : stem_channels > 0 && stem_channels <= 4096, op,
            "stem_channels {} with stem_layers {}: a stem needs 1..4096 channels, no stem needs 0", stem_channels,
            stem_layers);
  VIT_CHECK(conv_stages >= 0 && conv_stages <= 5, op, "conv_stages must be in [0, 5], got {}", conv_stages);
  if (conv_stages == 0) {
    VIT_CHECK(conv_channels == 0 && conv_blocks == 0 && conv_stem_stride == 1, op,
              "conv_channels {}, conv_blocks {} and conv_stem_stride {} need conv_stages > 0 (0 stages: no "
              "convolutional backbone)",
              conv_channels, conv_blocks, conv_stem_stride);
  } else {
    VIT_CHECK(stem_layers == 0, op,
              "a model has a stem (stem_layers) or a convolutional backbone (conv_stages), not both");
    VIT_CHECK(conv_channels > 0 && conv_channels <= 4096 && (conv_channels << (conv_stages - 1)) <= 4096, op,
              "conv_channels must be > 0 and the last stage's {} x 2^{} at most 4096, got {}", conv_channels,
              conv_stages - 1, conv_channels);
    VIT_CHECK(conv_blocks >= 1 && conv_blocks <= 16, op, "conv_blocks must be in [1, 16], got {}", conv_blocks);
    VIT_CHECK(conv_stem_stride == 1 || conv_stem_stride == 2, op, "conv_stem_stride must be 1 or 2, got {}",
              conv_stem_stride);
    VIT_CHECK(patch_size % feature_stride() == 0, op,
              "patch_size {} must be a multiple of the backbone's stride {} (conv_stem_stride x 2^(conv_stages - 1))",
              patch_size, feature_stride());
  }
}

std::string ViTConfig::to_json() const { return fields_to_json<nlohmann::ordered_json>(*this).dump(); }

ViTConfig ViTConfig::from_json(const std::string& text) {
  ViTConfig c;
  try {
    fields_from_json(nlohmann::json::parse(text), c);
  } catch (const nlohmann::json::exception& e) {
    fail("vit_config", "invalid model config JSON: {}", e.what());
  }
  c.validate();
  return c;
}

bool ViTConfig::same_architecture(const ViTConfig& o) const {
  return image_size == o.image_size && patch_size == o.patch_size && in_channels == o.in_channels &&
         num_classes == o.num_classes && dim == o.dim && depth == o.depth && num_heads == o.num_heads &&
         hidden_dim() == o.hidden_dim() && qkv_bias == o.qkv_bias && pool == o.pool &&
         representation_size == o.representation_size && stem_layers == o.stem_layers &&
         stem_channels == o.stem_channels && conv_stages == o.conv_stages && conv_channels == o.conv_channels &&
         conv_blocks == o.conv_blocks && conv_stem_stride == o.conv_stem_stride && reg_tokens == o.reg_tokens &&
         dist_token == o.dist_token && no_embed_class == o.no_embed_class && pre_norm == o.pre_norm &&
         final_norm == o.final_norm && act == o.act && (layer_scale > 0) == (o.layer_scale > 0) &&
         qk_norm == o.qk_norm && head_dim() == o.head_dim() && mlp_layers == o.mlp_layers &&
         norm_tokens == o.norm_tokens && head_tanh == o.head_tanh && projection == o.projection &&
         head_bias == o.head_bias;
}

}  // namespace vit::model
