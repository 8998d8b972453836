// Hugging Face's layout, one source per model family, picked by marker keys:
//   DINOv2 (Dinov2Model, Dinov2WithRegistersModel): a dinov2. prefix, layer_scale1, mask_token;
//   DeiT (DeiTForImageClassificationWithTeacher): a deit. prefix, distillation_token;
//   CLIP (CLIPVisionModel[WithProjection]): a vision_model. prefix, visual_projection,
//     embeddings.class_embedding;
//   ViT (ViTModel, ViTForImageClassification): the rest.
// Each renames by its table of rules (q, k, v stacked into qkv), then fixes what renaming cannot:
// CLIP's class and position embedding shapes, DINOv2-with-registers' class position.
#include <fmt/format.h>

#include <cmath>

#include "model/layouts/sources.h"

namespace vit::model::layouts {
namespace {

const std::vector<std::string> kPrefixes = {"vit.", "deit.", "dinov2.", "vision_model."};
const std::regex& block_regex() {
  static const std::regex block(R"(encoder\.layers?\.(\d+)\.(.+))");
  return block;
}

// The q, k, v rules of one family: `pattern` names a piece from its name and "weight" / "bias".
std::vector<Rule> qkv_rules(const char* query, const char* key, const char* value, const char* pattern) {
  std::vector<Rule> rules;
  int piece = 0;
  for (const char* part : {query, key, value}) {
    for (const char* param : {"weight", "bias"}) {
      rules.push_back({fmt::format(fmt::runtime(pattern), part, param), fmt::format("attn.qkv.{}", param), piece});
    }
    ++piece;
  }
  return rules;
}

// Rules for a weight and a bias: {foreign}.weight -> {timm}.weight, and the same for .bias.
void add_affine(std::vector<Rule>& rules, const char* foreign, const char* timm) {
  for (const char* param : {"weight", "bias"}) {
    rules.push_back({fmt::format("{}.{}", foreign, param), fmt::format("{}.{}", timm, param)});
  }
}

bool any_key(const NamedTensors& tensors, bool (*marks)(const std::string& key)) {
  for (const auto& [name, _] : tensors) {
    if (!is_ignored_key(name, Layout::HuggingFace) && marks(name)) return true;
  }
  return false;
}

Converted renamed(const NamedTensors& tensors, const Rules& rules, const std::string& source, Family family,
                  double eps) {
  Converted out;
  out.family = family;
  out.eps = eps;
  rename(tensors, rules, Layout::HuggingFace, source, out);
  return out;
}

// ---- ViT: the Hugging Face column of top_level_keys() / block_keys(), q/k/v apart ----

const Rules& vit_rules() {
  static const Rules rules = [] {
    Rules r{kPrefixes, rules_from(top_level_keys(), Layout::HuggingFace), block_regex(), {}};
    r.block_rules = qkv_rules("query", "key", "value", "attention.attention.{}.{}");
    for (Rule& rule : rules_from(block_keys(), Layout::HuggingFace)) r.block_rules.push_back(rule);
    return r;
  }();
  return rules;
}

Converted convert_vit(const NamedTensors& tensors, const std::string& source) {
  return renamed(tensors, vit_rules(), source, Family::Vit, 1e-12);
}

// ---- DeiT: ViT's, with the distillation token and the two classifiers ----

bool deit(const NamedTensors& tensors) {
  return any_key(tensors, [](const std::string& key) {
    return has_prefix(key, "deit.") || key.find("distillation_token") != std::string::npos;
  });
}

const Rules& deit_rules() {
  static const Rules rules = [] {
    Rules r = vit_rules();
    r.top.push_back({"embeddings.distillation_token", "dist_token"});
    add_affine(r.top, "cls_classifier", "head");
    add_affine(r.top, "distillation_classifier", "head_dist");
    return r;
  }();
  return rules;
}

Converted convert_deit(const NamedTensors& tensors, const std::string& source) {
  return renamed(tensors, deit_rules(), source, Family::Deit, 1e-12);
}

// ---- DINOv2: registers, timm-like block names, LayerScale ----

bool dinov2(const NamedTensors& tensors) {
  return any_key(tensors, [](const std::string& key) {
    return key.find("layer_scale1.") != std::string::npos || key.find("mask_token") != std::string::npos ||
           has_prefix(key, "dinov2.");
  });
}

const Rules& dinov2_rules() {
  static const Rules rules = [] {
    Rules r{kPrefixes, rules_from(top_level_keys(), Layout::HuggingFace), block_regex(), {}};
    r.top.push_back({"embeddings.register_tokens", "reg_token"});
    r.block_rules = qkv_rules("query", "key", "value", "attention.attention.{}.{}");
    add_affine(r.block_rules, "norm1", "norm1");
    add_affine(r.block_rules, "attention.output.dense", "attn.proj");
    r.block_rules.push_back({"layer_scale1.lambda1", "ls1.gamma"});
    add_affine(r.block_rules, "norm2", "norm2");
    add_affine(r.block_rules, "mlp.fc1", "mlp.fc1");
    add_affine(r.block_rules, "mlp.fc2", "mlp.fc2");
    r.block_rules.push_back({"layer_scale2.lambda1", "ls2.gamma"});
    return r;
  }();
  return rules;
}

// With registers the position table covers the class token but not the registers; as timm does,
// fold the class token's position into the token and keep the patch rows (no_embed_class), so the
// registers need no position.
void fold_class_position(NamedTensors& weights) {
  Tensor* pos = find(weights, "pos_embed");
  Tensor* cls = find(weights, "cls_token");
  if (find(weights, "reg_token") == nullptr || pos == nullptr || cls == nullptr) return;
  if (pos->dim() != 3 || pos->size(1) <= 1 || cls->dim() != 3 || cls->size(2) != pos->size(2)) return;
  const auto patches = pos->size(1) - 1;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(patches))));
  if (grid * grid != patches) return;
  Tensor folded = cls->to(DType::F32).contiguous().clone();              // (1, 1, D)
  const Tensor first = pos->slice(1, 0, 1).to(DType::F32).contiguous();  // (1, 1, D)
  for (int64_t i = 0; i < folded.numel(); ++i) folded.data<float>()[i] += first.data<float>()[i];
  *cls = folded;
  *pos = pos->slice(1, 1, pos->size(1)).contiguous();  // (1, gh*gw, D)
}

Converted convert_dinov2(const NamedTensors& tensors, const std::string& source) {
  Converted out = renamed(tensors, dinov2_rules(), source, Family::Dinov2, 1e-6);
  fold_class_position(out.weights);
  return out;
}

// ---- CLIP's vision tower: its own names, split q/k/v projections, the image projection ----

bool clip(const NamedTensors& tensors) {
  return any_key(tensors, [](const std::string& key) {
    return has_prefix(key, "vision_model.") || key == "visual_projection.weight" ||
           key == "embeddings.class_embedding";  // vision_model's own state dict has no prefix
  });
}

const Rules& clip_rules() {
  static const Rules rules = [] {
    Rules r{kPrefixes, {}, block_regex(), {}};
    r.top = {{"embeddings.class_embedding", "cls_token"},
             {"embeddings.position_embedding.weight", "pos_embed"},
             {"embeddings.patch_embedding.weight", "patch_embed.proj.weight"}};
    add_affine(r.top, "pre_layrnorm", "norm_pre");
    add_affine(r.top, "post_layernorm", "norm");
    r.top.push_back({"visual_projection.weight", "head.weight"});
    r.block_rules = qkv_rules("q", "k", "v", "self_attn.{}_proj.{}");
    add_affine(r.block_rules, "layer_norm1", "norm1");
    add_affine(r.block_rules, "self_attn.out_proj", "attn.proj");
    add_affine(r.block_rules, "layer_norm2", "norm2");
    add_affine(r.block_rules, "mlp.fc1", "mlp.fc1");
    add_affine(r.block_rules, "mlp.fc2", "mlp.fc2");
    return r;
  }();
  return rules;
}

// QuickGELU, eps 1e-5; a visual_projection is the head. CLIP keeps its class embedding as (D) and
// its position table as (N, D).
Converted convert_clip(const NamedTensors& tensors, const std::string& source) {
  Converted out = renamed(tensors, clip_rules(), source, Family::Clip, 1e-5);
  out.act = "quick_gelu";
  out.projection = find(out.weights, "head.weight") != nullptr;
  if (Tensor* cls = find(out.weights, "cls_token"); cls != nullptr && cls->dim() == 1)
    *cls = cls->reshape({1, 1, cls->size(0)});  // (1, 1, D)
  if (Tensor* pos = find(out.weights, "pos_embed"); pos != nullptr && pos->dim() == 2)
    *pos = pos->reshape({1, pos->size(0), pos->size(1)});  // (1, N, D)
  return out;
}

}  // namespace

const std::vector<Source>& huggingface_sources() {
  static const std::vector<Source> sources = {
      {"huggingface dinov2", Layout::HuggingFace, dinov2, convert_dinov2},
      {"huggingface deit", Layout::HuggingFace, deit, convert_deit},
      {"huggingface clip", Layout::HuggingFace, clip, convert_clip},
      {"huggingface vit", Layout::HuggingFace, nullptr, convert_vit},
  };
  return sources;
}

}  // namespace vit::model::layouts
