// ViTConfig: everything that defines a Vision Transformer's shape, with timm's presets and
// small presets for 28x28 digits and 32x32 CIFAR images. Validated with clear errors, and
// serialised to JSON so every checkpoint carries its own config (fields listed once, in
// visit_fields; see core/fields.h).
#pragma once

#include <string>
#include <vector>

#include "core/fields.h"

namespace vit::model {

struct ViTConfig {
  std::string name = "custom";
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  int64_t dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  int64_t mlp_dim = 0;  // hidden size of the MLP; 0 means round(dim * mlp_ratio)
  bool qkv_bias = true;
  double dropout = 0.0;             // after position embedding, in the MLP, after the attention projection
  double attn_dropout = 0.0;        // on attention probabilities
  double drop_path = 0.0;           // stochastic depth rate of the last block (linear decay from 0)
  std::string pool = "cls";         // "cls" token or "mean" of the patch tokens
  double eps = 1e-6;                // LayerNorm eps
  int64_t representation_size = 0;  // > 0: a pre-logits Linear(dim, size) + Tanh before the head
  // A convolutional stem in front of the patch embedding (the original paper's "hybrid" ViT, small):
  // stem_layers x [Conv2d(3x3, stride 1, padding 1) to stem_channels + GELU]; the patch embedding
  // then reads stem_channels channels. 0 layers: none (plain ViT, timm's layout).
  int64_t stem_layers = 0;
  int64_t stem_channels = 0;

  int64_t embed_channels() const { return stem_layers > 0 ? stem_channels : in_channels; }

  int64_t grid() const { return image_size / patch_size; }
  int64_t num_patches() const { return grid() * grid(); }
  int64_t num_tokens() const { return num_patches() + (pool == "cls" ? 1 : 0); }
  int64_t head_dim() const { return dim / num_heads; }
  int64_t hidden_dim() const;
  // Throws "[vit_config] ..." naming the first inconsistency.
  void validate() const;

  // One line per field, in the JSON order of every checkpoint's "model_config". Optional keys
  // were added after the first checkpoints were written: those files load with the defaults.
  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("name", name);
    visit("image_size", image_size);
    visit("patch_size", patch_size);
    visit("in_channels", in_channels);
    visit("num_classes", num_classes);
    visit("dim", dim);
    visit("depth", depth);
    visit("num_heads", num_heads);
    visit("mlp_ratio", mlp_ratio);
    visit("mlp_dim", mlp_dim, Presence::Optional);
    visit("qkv_bias", qkv_bias);
    visit("dropout", dropout, Presence::Optional);
    visit("attn_dropout", attn_dropout, Presence::Optional);
    visit("drop_path", drop_path, Presence::Optional);
    visit("pool", pool);
    visit("eps", eps);
    visit("representation_size", representation_size, Presence::Optional);
    visit("stem_layers", stem_layers, Presence::Optional);
    visit("stem_channels", stem_channels, Presence::Optional);
  }
  std::string to_json() const;
  static ViTConfig from_json(const std::string& json);   // throws on missing/invalid fields
  bool same_architecture(const ViTConfig& other) const;  // everything but dropout rates and name
};

// Preset names: vit_tiny_patch16_224, vit_small_patch16_224, vit_base_patch16_224,
// vit_large_patch16_224, vit_digits (28x28x1), vit_fashion (28x28x1, the default of `vit train`),
// vit_cifar (32x32x3).
ViTConfig preset(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace vit::model
