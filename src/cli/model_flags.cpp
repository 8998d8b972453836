// The shared model flags (see model_flags.h).
#include "cli/model_flags.h"

namespace vit::cli {

ModelFlags::ModelFlags(CLI::App& cmd) {
  using C = model::ViTConfig;
  // Each row: flag, the ViTConfig field it sets, help. A flag remembers its field, so that only
  // the flags on the command line override the preset.
  auto flag = [&]<typename T>(const char* name, T C::*field, const char* help) {
    CLI::Option* option = cmd.add_option(name, values_.*field, help);
    flags_.emplace_back(option, [this, field](C& target) { target.*field = values_.*field; });
  };
  flag("--image-size", &C::image_size, "image height and width");
  flag("--patch-size", &C::patch_size, "patch size");
  flag("--channels", &C::in_channels, "input channels");
  flag("--num-classes", &C::num_classes, "classes");
  flag("--dim", &C::dim, "embedding dim");
  flag("--depth", &C::depth, "encoder blocks");
  flag("--heads", &C::num_heads, "attention heads");
  flag("--mlp-ratio", &C::mlp_ratio, "MLP hidden size / dim");
  flag("--mlp-dim", &C::mlp_dim, "MLP hidden size (overrides --mlp-ratio; 0: from the ratio)");
  flag("--pool", &C::pool, "cls or mean");
  flag("--dropout", &C::dropout, "dropout rate");
  flag("--attn-dropout", &C::attn_dropout, "attention dropout rate");
  flag("--drop-path", &C::drop_path, "stochastic depth rate (last block)");
  flag("--eps", &C::eps, "LayerNorm eps");
  flag("--representation-size", &C::representation_size, "pre-logits layer size (0: none)");
  CLI::Option* qkv_bias = cmd.add_flag("--qkv-bias,!--no-qkv-bias", values_.qkv_bias, "biases on q, k and v");
  flags_.emplace_back(qkv_bias, [this](C& target) { target.qkv_bias = values_.qkv_bias; });
}

bool ModelFlags::given() const {
  for (const auto& [option, apply] : flags_) {
    if (option->count() > 0) return true;
  }
  return false;
}

void ModelFlags::exclude(CLI::Option* option) {
  for (const auto& [flag, apply] : flags_) flag->excludes(option);
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
