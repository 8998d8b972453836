// ViTConfig: everything that defines a Vision Transformer's shape, with timm's presets and
// small presets for 28x28 digits and 32x32 CIFAR images. Validated with clear errors, and
// serialised to JSON so every checkpoint carries its own config (fields listed once, in
// visit_fields; see core/fields.h).
#pragma once

#include <string>
#include <vector>

#include "core/fields.h"

namespace vit::model {

// How a model pools its tokens into features, named once (kPoolNames; the config, checkpoint
// metadata and --pool carry the names, the engine compares the enum): "cls" the class token's row
// after the final norm; "avg" a class token is kept (and trained) but the features are fc_norm(mean
// of the patch tokens) (timm's global_pool="avg", MAE-style fine-tunes); "mean" no class token,
// fc_norm(mean of the patch tokens). Prefix tokens (class, distillation, registers) never enter a mean.
enum class PoolKind { Cls, Avg, Mean };
struct PoolName {
  PoolKind kind;
  const char* name;
};
inline constexpr PoolName kPoolNames[] = {{PoolKind::Cls, "cls"}, {PoolKind::Avg, "avg"}, {PoolKind::Mean, "mean"}};
// "[op] pool must be 'cls', 'avg' (class token kept, patch mean) or 'mean' (no class token), got 'x'".
PoolKind parse_pool_kind(const std::string& name, const char* op = "vit_config");
const char* pool_kind_name(PoolKind kind);

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
  std::string pool = "cls";         // a PoolKind's name (pool_kind())
  double eps = 1e-6;                // LayerNorm eps
  int64_t representation_size = 0;  // > 0: a pre-logits Linear(dim, size) + Tanh before the head
  // A convolutional stem in front of the patch embedding (the original paper's "hybrid" ViT, small):
  // stem_layers x [Conv2d(3x3, stride 1, padding 1) to stem_channels + GELU]; the patch embedding
  // then reads stem_channels channels. 0 layers: none (plain ViT, timm's layout).
  int64_t stem_layers = 0;
  int64_t stem_channels = 0;
  // A convolutional backbone instead (model/backbone.h: ResNet-style stages with BatchNorm):
  // conv_stages stages of conv_blocks residual blocks, conv_channels wide at the stem's resolution and
  // doubling as each further stage halves the map. patch_size stays in image pixels: the patch
  // embedding reads the feature map in (patch_size / feature_stride())-wide patches, so grid() and
  // the token count are the plain ViT's. 0 stages: none.
  int64_t conv_stages = 0;
  int64_t conv_channels = 0;
  int64_t conv_blocks = 0;
  int64_t conv_stem_stride = 1;  // 2: the backbone's first convolution halves the image (LeViT's stem)
  // The descendants of ViT (timm's names):
  int64_t reg_tokens = 0;       // register tokens (DINOv2 "reg4"): reg_token (1, R, D), after the class token
  bool dist_token = false;      // DeiT's distillation token (second prefix token) and head_dist
  bool no_embed_class = false;  // pos_embed covers the patch tokens only (DeiT III, DINOv2 reg)
  bool pre_norm = false;        // CLIP: norm_pre after the position embedding; no patch-embedding bias
  bool final_norm = true;       // the final norm (or fc_norm); false: none (the ViT notebook)
  std::string act = "gelu";     // MLP activation, an nn::ActivationKind's name (nn/activation_kind.h)
  double layer_scale = 0.0;     // > 0: LayerScale (ls1.gamma, ls2.gamma) initialised to this value
  bool qk_norm = false;         // LayerNorm over each head's q and k (attn.q_norm, attn.k_norm)
  int64_t dim_head = 0;         // width of one attention head; 0: dim / num_heads
  int64_t mlp_layers = 2;       // 2: fc1 -> act -> fc2; 1: one Linear(dim, dim) (the ViT notebook)
  bool norm_tokens = false;     // block LayerNorms over (N, dim) (tokens and channels: the ViT notebook)
  bool head_tanh = false;       // logits = tanh(head(x)) (the ViT notebook)
  bool projection = false;      // CLIP: `head` is the image projection; its output is the embedding
  bool head_bias = true;        // false: the head has no bias (Hugging Face CLIP's visual_projection)

  bool hybrid() const { return conv_stages > 0; }
  // How many pixels one step of the backbone's feature map spans (1 without a backbone).
  int64_t feature_stride() const { return hybrid() ? conv_stem_stride << (conv_stages - 1) : 1; }
  int64_t feature_size() const { return image_size / feature_stride(); }  // the map the patch embedding reads
  int64_t embed_patch() const { return patch_size / feature_stride(); }   // its kernel and stride
  int64_t embed_channels() const {
    return hybrid() ? conv_channels << (conv_stages - 1) : stem_layers > 0 ? stem_channels : in_channels;
  }

  int64_t grid() const { return image_size / patch_size; }
  int64_t num_patches() const { return grid() * grid(); }
  PoolKind pool_kind() const { return parse_pool_kind(pool); }
  bool class_token() const { return pool_kind() != PoolKind::Mean; }
  // Tokens in front of the patches: [cls] [dist] [reg x R], in that order.
  int64_t prefix_tokens() const { return (class_token() ? 1 : 0) + (dist_token ? 1 : 0) + reg_tokens; }
  int64_t num_tokens() const { return num_patches() + prefix_tokens(); }
  // Rows of pos_embed: the patches, plus the prefix tokens unless no_embed_class (timm's rule).
  int64_t pos_tokens() const { return num_patches() + (no_embed_class ? 0 : prefix_tokens()); }
  int64_t head_dim() const { return dim_head > 0 ? dim_head : dim / num_heads; }
  int64_t attn_dim() const { return num_heads * head_dim(); }  // width of q, k, v and the merged heads
  bool has_head() const { return num_classes > 0; }
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
    visit("conv_stages", conv_stages, Presence::Optional);
    visit("conv_channels", conv_channels, Presence::Optional);
    visit("conv_blocks", conv_blocks, Presence::Optional);
    visit("conv_stem_stride", conv_stem_stride, Presence::Optional);
    visit("reg_tokens", reg_tokens, Presence::Optional);
    visit("dist_token", dist_token, Presence::Optional);
    visit("no_embed_class", no_embed_class, Presence::Optional);
    visit("pre_norm", pre_norm, Presence::Optional);
    visit("final_norm", final_norm, Presence::Optional);
    visit("act", act, Presence::Optional);
    visit("layer_scale", layer_scale, Presence::Optional);
    visit("qk_norm", qk_norm, Presence::Optional);
    visit("dim_head", dim_head, Presence::Optional);
    visit("mlp_layers", mlp_layers, Presence::Optional);
    visit("norm_tokens", norm_tokens, Presence::Optional);
    visit("head_tanh", head_tanh, Presence::Optional);
    visit("projection", projection, Presence::Optional);
    visit("head_bias", head_bias, Presence::Optional);
  }
  std::string to_json() const;
  static ViTConfig from_json(const std::string& json);   // throws on missing/invalid fields
  bool same_architecture(const ViTConfig& other) const;  // everything but dropout rates and name
};

// Preset names (preset_names() lists them): timm's ViT, DeiT (distilled), DeiT III, DINOv2 (with
// and without registers), CLIP image towers, and ours: vit_digits (28x28x1), vit_hybrid_fashion (28x28x1,
// the default of `vit train`: convolutions, then one transformer block), vit_fashion (the plain one), vit_cifar
// (32x32x3), vit_notebook (the ViT notebook's class). One table (presets.cpp) holds them all: an unknown name is
// refused listing the known ones.
ViTConfig preset(const std::string& name);
std::vector<std::string> preset_names();
// What the preset's architecture is, in one line (whatever recipe trains it).
std::string preset_description(const std::string& name);

}  // namespace vit::model
