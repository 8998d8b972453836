// The model options, declared once (see model_options.h).
#include "model/model_options.h"

#include <type_traits>

#include "core/check.h"
#include "core/fields.h"
#include "core/parse.h"

namespace vit::model {
namespace {

// The key ViTConfig::visit_fields gives the field `field` points to: the table names fields by
// member, the checkpoint's JSON by key, and this ties the two without a second list.
template <typename T>
std::string field_key(T ViTConfig::*field) {
  ViTConfig probe;
  std::string key;
  auto find = [&](const char* name, auto& value, Presence = Presence::Required) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, T>) {
      if (&value == &(probe.*field)) key = name;
    }
  };
  probe.visit_fields(find);
  VIT_ASSERT(!key.empty());
  return key;
}

// The setter of a field of type T. An empty value would read as 0 for a number, which is a valid
// setting for several fields (no stem, no representation layer): it is refused for every type.
template <typename T>
std::function<void(ViTConfig&, const std::string&, const std::string&)> setter(T ViTConfig::*field) {
  return [field](ViTConfig& c, const std::string& text, const std::string& what) {
    VIT_CHECK(!text.empty(), "model", "{}: must not be empty", what);
    if constexpr (std::is_same_v<T, bool>) {
      c.*field = parse_bool(text, "model", what);
    } else if constexpr (std::is_integral_v<T>) {
      c.*field = parse_int(text, "model", what);
    } else if constexpr (std::is_floating_point_v<T>) {
      c.*field = parse_number(text, "model", what);
    } else {
      c.*field = text;
    }
  };
}

std::vector<ModelOption> make_table() {
  using C = ViTConfig;
  std::vector<ModelOption> t;
  auto value = [&]<typename T>(const char* name, T C::*field, const char* help) {
    const char* type = std::is_integral_v<T> ? "INT" : std::is_floating_point_v<T> ? "FLOAT" : "TEXT";
    t.push_back({name, "", field_key(field), help, false, type, setter(field)});
  };
  auto toggle = [&](const char* name, const char* negation, bool C::*field, const char* help) {
    t.push_back({name, negation, field_key(field), help, true, "", setter(field)});
  };
  value("image_size", &C::image_size, "image height and width");
  value("patch_size", &C::patch_size, "patch size");
  value("channels", &C::in_channels, "input channels");
  value("num_classes", &C::num_classes, "classes");
  value("dim", &C::dim, "embedding dim");
  value("depth", &C::depth, "encoder blocks");
  value("heads", &C::num_heads, "attention heads");
  value("mlp_ratio", &C::mlp_ratio, "MLP hidden size / dim");
  value("mlp_dim", &C::mlp_dim, "MLP hidden size (overrides --mlp-ratio; 0: from the ratio)");
  value("pool", &C::pool, "cls, avg (class token kept, patch mean + fc_norm) or mean (no class token)");
  value("dropout", &C::dropout, "dropout rate");
  value("attn_dropout", &C::attn_dropout, "attention dropout rate");
  value("drop_path", &C::drop_path, "stochastic depth rate (last block)");
  value("eps", &C::eps, "LayerNorm eps");
  value("representation_size", &C::representation_size, "pre-logits layer size (0: none)");
  value("stem_layers", &C::stem_layers, "3x3 convolution + GELU layers before the patch embedding (0: none)");
  value("stem_channels", &C::stem_channels, "channels of each stem convolution (0 without a stem)");
  value("conv_stages", &C::conv_stages,
        "a hybrid's ResNet stages before the patch embedding, each halving the map after the first (0: none)");
  value("conv_channels", &C::conv_channels, "channels of the first conv stage (doubling per stage)");
  value("conv_blocks", &C::conv_blocks, "residual blocks per conv stage");
  value("conv_stem_stride", &C::conv_stem_stride,
        "stride of the backbone's first convolution: 1 or 2 (halves the image)");
  // ViT's descendants (timm's options):
  value("reg_tokens", &C::reg_tokens, "register tokens after the class token (DINOv2's reg4: 4)");
  value("layer_scale", &C::layer_scale, "LayerScale: ls1/ls2 gammas initialised to this (0: none; DeiT III 1e-6)");
  value("act", &C::act, "MLP activation: gelu, gelu_tanh, quick_gelu, relu");
  value("dim_head", &C::dim_head, "width of one attention head (0: dim / heads)");
  toggle("qkv_bias", "no_qkv_bias", &C::qkv_bias, "biases on q, k and v");
  toggle("dist_token", "no_dist_token", &C::dist_token,
         "DeiT's distillation token and second head (trained against --teacher)");
  toggle("no_embed_class", "embed_class", &C::no_embed_class,
         "the position table covers the patch tokens only (DeiT III, DINOv2 with registers)");
  toggle("pre_norm", "no_pre_norm", &C::pre_norm, "a LayerNorm before the blocks, no patch bias (CLIP)");
  toggle("qk_norm", "no_qk_norm", &C::qk_norm, "LayerNorm over each head's queries and keys");
  return t;
}

}  // namespace

const std::vector<ModelOption>& model_options() {
  static const std::vector<ModelOption> table = make_table();
  return table;
}

const ModelOption* find_model_option(const std::string& name, bool* negated) {
  for (const ModelOption& o : model_options()) {
    if (o.name == name || (!o.negation.empty() && o.negation == name)) {
      if (negated) *negated = o.name != name;
      return &o;
    }
  }
  return nullptr;
}

}  // namespace vit::model
