// The shared model flags (see model_flags.h).
#include "cli/model_flags.h"

#include <type_traits>

#include "core/fields.h"

namespace vit::cli {
namespace {

// The key ViTConfig::visit_fields gives the field `field` points to: the flag table names fields
// by member, the checkpoint's JSON by key, and this ties the two without a second list.
template <typename T>
std::string field_key(T model::ViTConfig::*field) {
  model::ViTConfig probe;
  std::string key;
  auto find = [&](const char* name, auto& value, Presence = Presence::Required) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, T>) {
      if (&value == &(probe.*field)) key = name;
    }
  };
  probe.visit_fields(find);
  return key;
}

}  // namespace

ModelFlags::ModelFlags(CLI::App& cmd) {
  using C = model::ViTConfig;
  // Each row: flag, the ViTConfig field it sets, help. A flag remembers its field, so that only
  // the flags on the command line override the preset.
  // CLI11 reads an empty value ('') as 0, which is a valid setting for several fields (no stem,
  // no representation layer, MLP width from the ratio): an empty value is refused instead.
  const CLI::Validator not_empty(
      [](std::string& value) { return value.empty() ? std::string("must not be empty") : std::string(); }, "");
  auto flag = [&]<typename T>(const char* name, T C::*field, const char* help) {
    CLI::Option* option = cmd.add_option(name, values_.*field, help)->check(not_empty);
    flags_.emplace_back(option, [this, field](C& target) { target.*field = values_.*field; });
    keys_.push_back(field_key(field));
  };
  flag("--image-size", &C::image_size, "image height and width");
  flag("--patch-size", &C::patch_size, "patch size");
  flag("--channels", &C::in_channels, "input channels");
  flag("--num-classes", &C::num_classes, "classes");
  flag("--dim", &C::dim, "embedding dim");
  flag("--depth", &C::depth, "encoder blocks");
  flag("--heads", &C::num_heads, "attention heads");
  heads_ = flags_.back().first;
  flag("--mlp-ratio", &C::mlp_ratio, "MLP hidden size / dim");
  flag("--mlp-dim", &C::mlp_dim, "MLP hidden size (overrides --mlp-ratio; 0: from the ratio)");
  flag("--pool", &C::pool, "cls, avg (class token kept, patch mean + fc_norm) or mean (no class token)");
  flag("--dropout", &C::dropout, "dropout rate");
  flag("--attn-dropout", &C::attn_dropout, "attention dropout rate");
  flag("--drop-path", &C::drop_path, "stochastic depth rate (last block)");
  flag("--eps", &C::eps, "LayerNorm eps");
  flag("--representation-size", &C::representation_size, "pre-logits layer size (0: none)");
  flag("--stem-layers", &C::stem_layers, "3x3 convolution + GELU layers before the patch embedding (0: none)");
  flag("--stem-channels", &C::stem_channels, "channels of each stem convolution (0 without a stem)");
  // ViT's descendants (timm's options):
  flag("--reg-tokens", &C::reg_tokens, "register tokens after the class token (DINOv2's reg4: 4)");
  flag("--layer-scale", &C::layer_scale, "LayerScale: ls1/ls2 gammas initialised to this (0: none; DeiT III 1e-6)");
  flag("--act", &C::act, "MLP activation: gelu, gelu_tanh, quick_gelu, relu");
  flag("--dim-head", &C::dim_head, "width of one attention head (0: dim / heads)");
  auto toggle = [&](const char* names, bool C::*field, const char* help) {
    CLI::Option* option = cmd.add_flag(names, values_.*field, help);
    flags_.emplace_back(option, [this, field](C& target) { target.*field = values_.*field; });
    keys_.push_back(field_key(field));
  };
  toggle("--qkv-bias,!--no-qkv-bias", &C::qkv_bias, "biases on q, k and v");
  toggle("--dist-token,!--no-dist-token", &C::dist_token,
         "DeiT's distillation token and second head (trained against --teacher)");
  toggle("--no-embed-class,!--embed-class", &C::no_embed_class,
         "the position table covers the patch tokens only (DeiT III, DINOv2 with registers)");
  toggle("--pre-norm,!--no-pre-norm", &C::pre_norm, "a LayerNorm before the blocks, no patch bias (CLIP)");
  toggle("--qk-norm,!--no-qk-norm", &C::qk_norm, "LayerNorm over each head's queries and keys");
}

std::vector<std::string> ModelFlags::given_fields() const {
  std::vector<std::string> keys;
  for (size_t i = 0; i < flags_.size(); ++i) {
    if (flags_[i].first->count() > 0) keys.push_back(keys_[i]);
  }
  return keys;
}

bool ModelFlags::given() const {
  for (const auto& [option, apply] : flags_) {
    if (option->count() > 0) return true;
  }
  return false;
}

bool ModelFlags::contains(const CLI::Option* option) const {
  for (const auto& [flag, apply] : flags_) {
    if (flag == option) return true;
  }
  return false;
}

void ModelFlags::exclude(CLI::Option* option, const std::string& allowed) {
  for (const auto& [flag, apply] : flags_) {
    if (flag->get_name() != allowed) flag->excludes(option);
  }
}

model::ViTConfig ModelFlags::config(const std::string& preset_name, bool preset_given) const {
  model::ViTConfig c = model::preset(preset_name);
  for (const auto& [option, apply] : flags_) {
    if (option->count() > 0) apply(c);
  }
  if (given() && !preset_given) c.name = "custom";
  return c;
}

}  // namespace vit::cli
