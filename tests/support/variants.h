// Small configs of ViT's descendants for the tests: every option of ViTConfig that a
// descendant adds (distillation, registers, LayerScale, CLIP's pre-norm and projection, qk_norm,
// dim_head, the notebook's block, avg pooling, no head) alone, and in the combinations the
// families use.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/vit_config.h"

namespace vit::testing {

using model::preset;
using model::ViTConfig;

// ViT's descendants: every option alone and in the combinations the families use.
inline std::vector<ViTConfig> descendant_variants() {
  ViTConfig base;
  base.image_size = 12;
  base.patch_size = 4;
  base.in_channels = 2;
  base.num_classes = 5;
  base.dim = 16;
  base.num_heads = 2;
  base.mlp_ratio = 1.5;
  base.depth = 2;
  std::vector<std::pair<const char*, std::function<void(ViTConfig&)>>> options = {
      {"dist_token", [](ViTConfig& c) { c.dist_token = true; }},
      {"reg_tokens", [](ViTConfig& c) { c.reg_tokens = 3; }},
      {"no_embed_class", [](ViTConfig& c) { c.no_embed_class = true; }},
      {"pre_norm", [](ViTConfig& c) { c.pre_norm = true; }},
      {"no final_norm", [](ViTConfig& c) { c.final_norm = false; }},
      {"quick_gelu", [](ViTConfig& c) { c.act = "quick_gelu"; }},
      {"layer_scale", [](ViTConfig& c) { c.layer_scale = 0.1; }},
      {"qk_norm", [](ViTConfig& c) { c.qk_norm = true; }},
      {"dim_head", [](ViTConfig& c) { c.dim_head = 12; }},
      {"mlp_layers 1", [](ViTConfig& c) { c.mlp_layers = 1; }},
      {"norm_tokens", [](ViTConfig& c) { c.norm_tokens = true; }},
      {"head_tanh", [](ViTConfig& c) { c.head_tanh = true; }},
      {"projection", [](ViTConfig& c) { c.projection = true; }},
      {"no head_bias", [](ViTConfig& c) { c.head_bias = false; }},
      {"no head", [](ViTConfig& c) { c.num_classes = 0; }},
      {"avg", [](ViTConfig& c) { c.pool = "avg"; }},
  };
  std::vector<ViTConfig> configs;
  for (const auto& [name, apply] : options) {
    ViTConfig c = base;
    apply(c);
    c.name = name;
    configs.push_back(c);
  }
  auto all = [&](const char* name, std::initializer_list<const char*> picked) {
    ViTConfig c = base;
    for (const char* p : picked) {
      for (const auto& [option, apply] : options) {
        if (std::string(option) == p) apply(c);
      }
    }
    c.name = name;
    configs.push_back(c);
  };
  all("deit3 + registers + distillation", {"dist_token", "reg_tokens", "layer_scale", "no_embed_class"});
  all("clip", {"pre_norm", "quick_gelu", "projection", "no head_bias"});
  all("notebook", {"dim_head", "mlp_layers 1", "norm_tokens", "no final_norm", "head_tanh"});
  all("avg + registers + qk_norm", {"avg", "reg_tokens", "qk_norm", "dim_head"});
  ViTConfig mean = base;
  mean.pool = "mean";
  mean.reg_tokens = 2;
  mean.name = "mean + registers";
  configs.push_back(mean);
  for (const char* name : {"vit_notebook"}) configs.push_back(preset(name));
  return configs;
}

}  // namespace vit::testing
