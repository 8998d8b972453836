// Layout names, the key tables, layout detection, and to_timm: the one door to the per-source
// converters of layouts/ (see layout.h and sources.h).
#include "model/layouts/layout.h"

#include <algorithm>
#include <map>
#include <optional>

#include "core/check.h"
#include "core/printable.h"
#include "model/layouts/sources.h"

namespace vit::model {

using layouts::has_prefix;

const std::vector<KeyNames>& top_level_keys() {
  static const std::vector<KeyNames> keys = {
      {"cls_token", "class_token", "embeddings.cls_token"},
      {"pos_embed", "encoder.pos_embedding", "embeddings.position_embeddings"},
      {"patch_embed.proj.weight", "conv_proj.weight", "embeddings.patch_embeddings.projection.weight"},
      {"patch_embed.proj.bias", "conv_proj.bias", "embeddings.patch_embeddings.projection.bias"},
      {"norm.weight", "encoder.ln.weight", "layernorm.weight"},
      {"norm.bias", "encoder.ln.bias", "layernorm.bias"},
      {"pre_logits.fc.weight", "heads.pre_logits.weight", nullptr},
      {"pre_logits.fc.bias", "heads.pre_logits.bias", nullptr},
      {"head.weight", "heads.head.weight", "classifier.weight"},
      {"head.bias", "heads.head.bias", "classifier.bias"},
  };
  return keys;
}

const std::vector<KeyNames>& block_keys() {
  static const std::vector<KeyNames> keys = {
      {"norm1.weight", "ln_1.weight", "layernorm_before.weight"},
      {"norm1.bias", "ln_1.bias", "layernorm_before.bias"},
      {"attn.qkv.weight", "self_attention.in_proj_weight", nullptr},  // HF: attention.attention.{query,key,value}
      {"attn.qkv.bias", "self_attention.in_proj_bias", nullptr},
      {"attn.proj.weight", "self_attention.out_proj.weight", "attention.output.dense.weight"},
      {"attn.proj.bias", "self_attention.out_proj.bias", "attention.output.dense.bias"},
      {"norm2.weight", "ln_2.weight", "layernorm_after.weight"},
      {"norm2.bias", "ln_2.bias", "layernorm_after.bias"},
      {"mlp.fc1.weight", "mlp.0.weight", "intermediate.dense.weight"},
      {"mlp.fc1.bias", "mlp.0.bias", "intermediate.dense.bias"},
      {"mlp.fc2.weight", "mlp.3.weight", "output.dense.weight"},
      {"mlp.fc2.bias", "mlp.3.bias", "output.dense.bias"},
  };
  return keys;
}

const char* family_name(Family family) {
  for (const FamilyName& f : kFamilyNames) {
    if (family == f.family) return f.name;
  }
  return "?";
}

Family parse_family(const std::string& name, const std::string& source, const char* op) {
  for (const FamilyName& f : kFamilyNames) {
    if (name == f.name) return f.family;
  }
  fail(op, "{}: family '{}' is not one of vit, deit, dinov2, clip", source, printable(name));
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Timm:
      return "timm";
    case Layout::Torchvision:
      return "torchvision";
    case Layout::HuggingFace:
      return "huggingface";
    case Layout::Jax:
      return "jax";
  }
  return "?";
}

Layout parse_layout(const std::string& name) {
  if (name == "timm") return Layout::Timm;
  if (name == "torchvision") return Layout::Torchvision;
  if (name == "huggingface" || name == "hf") return Layout::HuggingFace;
  if (name == "jax") return Layout::Jax;
  fail("checkpoint", "unknown layout '{}' (timm, torchvision, huggingface, jax)", name);
}

namespace {

// The layout a key belongs to by its name alone, if it says.
std::optional<Layout> layout_of_key(const std::string& name) {
  // JAX/Flax names are '/'-separated paths (layouts/jax.cpp), with or without a prefix.
  for (const char* marker : {"embedding/kernel", "Transformer/", "encoderblock", "posembed_input"}) {
    if (name.find(marker) != std::string::npos && name.find('/') != std::string::npos) return Layout::Jax;
  }
  if (name == "class_token" || has_prefix(name, "encoder.layers.encoder_layer_") || has_prefix(name, "conv_proj.") ||
      name == "encoder.pos_embedding" || has_prefix(name, "heads.head."))
    return Layout::Torchvision;
  for (const char* prefix : {"vit.", "deit.", "dinov2.", "vision_model.", "embeddings.", "encoder.layer.",
                             "visual_projection.", "cls_classifier.", "distillation_classifier."}) {
    if (has_prefix(name, prefix)) return Layout::HuggingFace;
  }
  if (name == "pos_embed" || name == "cls_token" || has_prefix(name, "patch_embed.") || has_prefix(name, "blocks."))
    return Layout::Timm;
  return std::nullopt;
}

}  // namespace

Layout detect_layout(const NamedTensors& tensors, const std::string& source) {
  std::map<Layout, std::string> first_key;  // one key of each layout seen
  for (const auto& [name, _] : tensors) {
    if (const auto layout = layout_of_key(name)) first_key.emplace(*layout, name);
  }
  VIT_CHECK(!first_key.empty(), "checkpoint",
            "{}: not a ViT checkpoint of a known layout (no timm, torchvision, Hugging Face or JAX ViT keys)", source);
  if (first_key.size() > 1) {
    const auto a = first_key.begin(), b = std::next(a);
    fail("checkpoint", "{}: the file mixes layouts: '{}' is a {} key, '{}' a {} key (one model, one layout)", source,
         printable(a->second), layout_name(a->first), printable(b->second), layout_name(b->first));
  }
  return first_key.begin()->first;
}

bool is_ignored_key(const std::string& key, Layout layout) {
  if (layout != Layout::HuggingFace) return false;
  for (const char* suffix : {"embeddings.mask_token", "embeddings.position_ids"}) {
    const std::string s = suffix;
    if (key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

namespace {

// Registration order: tokens, pos_embed, stem / backbone / patch embedding, norm_pre, blocks by index, the rest.
void sort_registration_order(NamedTensors& weights) {
  auto rank = [](const std::string& n) -> std::pair<int, int64_t> {
    if (n == "cls_token") return {0, 0};
    if (n == "dist_token") return {1, 0};
    if (n == "reg_token") return {2, 0};
    if (n == "pos_embed") return {3, 0};
    if (has_prefix(n, "stem.") || has_prefix(n, "backbone.") || has_prefix(n, "patch_embed.")) return {4, 0};
    if (has_prefix(n, "norm_pre.")) return {5, 0};
    if (has_prefix(n, "blocks.")) return {6, std::stoll(n.substr(7, n.find('.', 7) - 7))};
    return {7, 0};
  };
  std::stable_sort(weights.begin(), weights.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
}

const std::vector<layouts::Source>& sources_of(Layout layout) {
  switch (layout) {
    case Layout::Timm:
      return layouts::timm_sources();
    case Layout::Torchvision:
      return layouts::torchvision_sources();
    case Layout::Jax:
      return layouts::jax_sources();
    case Layout::HuggingFace:
      break;
  }
  return layouts::huggingface_sources();
}

}  // namespace

// The source is picked once, by its marker keys (the layout's last source takes the rest); its
// converter does all the renaming. A timm file keeps its order, a converted one is put in
// registration order.
Converted to_timm(const NamedTensors& tensors, Layout layout, const std::string& source) {
  for (const layouts::Source& s : sources_of(layout)) {
    if (s.marked != nullptr && !s.marked(tensors)) continue;
    Converted out = s.convert(tensors, source);
    if (layout != Layout::Timm) sort_registration_order(out.weights);
    return out;
  }
  fail("checkpoint", "{}: no converter for the {} layout", source, layout_name(layout));
}

}  // namespace vit::model
