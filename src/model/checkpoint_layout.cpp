// Layout detection, renaming and config inference (see checkpoint_layout.h).
#include "model/checkpoint_layout.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>

#include "core/check.h"
#include "kernels/interpolate.h"

namespace vit::model {
namespace {

bool has_prefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

const Tensor* find(const NamedTensors& tensors, const std::string& key) {
  for (const auto& [name, t] : tensors) {
    if (name == key) return &t;
  }
  return nullptr;
}

// Older torchvision releases name the MLP's two Linear layers linear_1 / linear_2.
const std::vector<std::pair<std::string, std::string>> kTorchvisionLegacyBlock = {
    {"mlp.linear_1.weight", "mlp.fc1.weight"},
    {"mlp.linear_1.bias", "mlp.fc1.bias"},
    {"mlp.linear_2.weight", "mlp.fc2.weight"},
    {"mlp.linear_2.bias", "mlp.fc2.bias"},
};

// The timm name of a foreign key, looked up in one column of a KeyNames table.
std::string timm_name(const std::vector<KeyNames>& table, const std::string& key, Layout layout) {
  for (const KeyNames& k : table) {
    const char* foreign = layout == Layout::Torchvision ? k.torchvision : k.huggingface;
    if (foreign != nullptr && key == foreign) return k.timm;
  }
  return "";
}

}  // namespace

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

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Timm:
      return "timm";
    case Layout::Torchvision:
      return "torchvision";
    case Layout::HuggingFace:
      return "huggingface";
  }
  return "?";
}

Layout parse_layout(const std::string& name) {
  if (name == "timm") return Layout::Timm;
  if (name == "torchvision") return Layout::Torchvision;
  if (name == "huggingface" || name == "hf") return Layout::HuggingFace;
  fail("checkpoint", "unknown layout '{}' (timm, torchvision, huggingface)", name);
}

namespace {

// The layout a key belongs to by its name alone, if it says.
std::optional<Layout> layout_of_key(const std::string& name) {
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
            "{}: not a ViT checkpoint of a known layout (no timm, torchvision or Hugging Face ViT keys)", source);
  if (first_key.size() > 1) {
    const auto a = first_key.begin(), b = std::next(a);
    fail("checkpoint", "{}: the file mixes layouts: '{}' is a {} key, '{}' a {} key (one model, one layout)", source,
         a->second, layout_name(a->first), b->second, layout_name(b->first));
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

// Hugging Face keys (without their model prefix) outside the blocks, for every family.
const std::map<std::string, std::string>& hf_top_keys() {
  static const std::map<std::string, std::string> keys = {
      {"embeddings.cls_token", "cls_token"},
      {"embeddings.distillation_token", "dist_token"},
      {"embeddings.register_tokens", "reg_token"},
      {"embeddings.position_embeddings", "pos_embed"},
      {"embeddings.patch_embeddings.projection.weight", "patch_embed.proj.weight"},
      {"embeddings.patch_embeddings.projection.bias", "patch_embed.proj.bias"},
      {"layernorm.weight", "norm.weight"},
      {"layernorm.bias", "norm.bias"},
      {"classifier.weight", "head.weight"},
      {"classifier.bias", "head.bias"},
      {"cls_classifier.weight", "head.weight"},
      {"cls_classifier.bias", "head.bias"},
      {"distillation_classifier.weight", "head_dist.weight"},
      {"distillation_classifier.bias", "head_dist.bias"},
      // CLIP's vision tower
      {"embeddings.class_embedding", "cls_token"},
      {"embeddings.patch_embedding.weight", "patch_embed.proj.weight"},
      {"embeddings.position_embedding.weight", "pos_embed"},
      {"pre_layrnorm.weight", "norm_pre.weight"},
      {"pre_layrnorm.bias", "norm_pre.bias"},
      {"post_layernorm.weight", "norm.weight"},
      {"post_layernorm.bias", "norm.bias"},
      {"visual_projection.weight", "head.weight"},
  };
  return keys;
}

// Hugging Face block keys (after encoder.layer{s}.{i}.) of DINOv2 and CLIP; ViT / DeiT's are
// block_keys()' Hugging Face column. q/k/v are handled apart.
const std::map<std::string, std::string>& hf_descendant_block_keys() {
  static const std::map<std::string, std::string> keys = {
      {"norm1.weight", "norm1.weight"},
      {"norm1.bias", "norm1.bias"},
      {"norm2.weight", "norm2.weight"},
      {"norm2.bias", "norm2.bias"},
      {"layer_scale1.lambda1", "ls1.gamma"},
      {"layer_scale2.lambda1", "ls2.gamma"},
      {"mlp.fc1.weight", "mlp.fc1.weight"},
      {"mlp.fc1.bias", "mlp.fc1.bias"},
      {"mlp.fc2.weight", "mlp.fc2.weight"},
      {"mlp.fc2.bias", "mlp.fc2.bias"},
      {"layer_norm1.weight", "norm1.weight"},
      {"layer_norm1.bias", "norm1.bias"},
      {"layer_norm2.weight", "norm2.weight"},
      {"layer_norm2.bias", "norm2.bias"},
      {"self_attn.out_proj.weight", "attn.proj.weight"},
      {"self_attn.out_proj.bias", "attn.proj.bias"},
  };
  return keys;
}

std::string strip_hf_prefix(const std::string& name) {
  for (const char* prefix : {"vit.", "deit.", "dinov2.", "vision_model."}) {
    if (has_prefix(name, prefix)) return name.substr(std::string(prefix).size());
  }
  return name;
}

// Registration order: tokens, pos_embed, stem / patch embedding, norm_pre, blocks by index, the rest.
void sort_registration_order(NamedTensors& weights) {
  auto rank = [](const std::string& n) -> std::pair<int, int64_t> {
    if (n == "cls_token") return {0, 0};
    if (n == "dist_token") return {1, 0};
    if (n == "reg_token") return {2, 0};
    if (n == "pos_embed") return {3, 0};
    if (has_prefix(n, "stem.") || has_prefix(n, "patch_embed.")) return {4, 0};
    if (has_prefix(n, "norm_pre.")) return {5, 0};
    if (has_prefix(n, "blocks.")) return {6, std::stoll(n.substr(7, n.find('.', 7) - 7))};
    return {7, 0};
  };
  std::stable_sort(weights.begin(), weights.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
}

bool all_zero(const Tensor& t) {
  const Tensor f = t.to(DType::F32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (p[i] != 0.0f) return false;
  }
  return true;
}

}  // namespace

Converted to_timm(const NamedTensors& tensors, Layout layout, const std::string& source) {
  Converted out;
  if (layout == Layout::Timm) {
    out.weights = tensors;
    // OpenAI CLIP in timm's names: norm_pre and a patch embedding without bias. Its head, when
    // its bias is all zero (timm writes the projection so), is the image projection.
    const Tensor* norm_pre = find(tensors, "norm_pre.weight");
    if (norm_pre != nullptr && find(tensors, "patch_embed.proj.bias") == nullptr) {
      out.family = "clip";
      out.eps = 1e-5;
      out.act = "quick_gelu";
      const Tensor* head_bias = find(tensors, "head.bias");
      out.projection = find(tensors, "head.weight") != nullptr && (head_bias == nullptr || all_zero(*head_bias));
    } else if (find(tensors, "dist_token") != nullptr) {
      out.family = "deit";
    } else if (find(tensors, "blocks.0.ls1.gamma") != nullptr) {
      out.family = "dinov2";
    }
    return out;
  }
  static const std::regex tv_block(R"(encoder\.layers\.encoder_layer_(\d+)\.(.+))");
  static const std::regex hf_block(R"(encoder\.layers?\.(\d+)\.(.+))");
  static const std::regex qkv_part(
      R"((?:attention\.attention\.(query|key|value)|self_attn\.(q|k|v)_proj)\.(weight|bias))");
  // Hugging Face q/k/v pieces per block, concatenated once all three are seen.
  std::map<int64_t, std::map<std::string, Tensor>> qkv;
  std::map<int64_t, std::map<std::string, std::string>> sources;  // the file's key of each piece
  for (const auto& [name, t] : tensors) {
    std::smatch m;
    std::string mapped;
    if (layout == Layout::Torchvision) {
      mapped = timm_name(top_level_keys(), name, layout);
      if (mapped.empty() && std::regex_match(name, m, tv_block)) {
        std::string timm = timm_name(block_keys(), m[2], layout);
        for (const auto& [suffix, legacy] : kTorchvisionLegacyBlock) {
          if (m[2] == suffix) timm = legacy;
        }
        if (!timm.empty()) mapped = "blocks." + m[1].str() + "." + timm;
      }
    } else {
      if (is_ignored_key(name, layout)) {
        out.ignored.push_back(name);
        continue;
      }
      if (has_prefix(name, "vision_model.") || name == "visual_projection.weight") out.family = "clip";
      if (has_prefix(name, "deit.") || name.find("distillation_token") != std::string::npos) out.family = "deit";
      if (name.find("layer_scale1.") != std::string::npos || name.find("mask_token") != std::string::npos ||
          has_prefix(name, "dinov2."))
        out.family = "dinov2";
      const std::string key = strip_hf_prefix(name);
      if (const auto it = hf_top_keys().find(key); it != hf_top_keys().end()) mapped = it->second;
      if (mapped.empty() && std::regex_match(key, m, hf_block)) {
        const std::string rest = m[2];
        std::smatch q;
        if (std::regex_match(rest, q, qkv_part)) {
          const std::string piece = q[1].matched ? q[1].str() : (q[2] == "q" ? "query" : q[2] == "k" ? "key" : "value");
          qkv[std::stoll(m[1])][piece + "." + q[3].str()] = t;
          sources[std::stoll(m[1])][piece + "." + q[3].str()] = name;
          continue;
        }
        std::string timm = timm_name(block_keys(), rest, layout);
        if (const auto it = hf_descendant_block_keys().find(rest);
            timm.empty() && it != hf_descendant_block_keys().end())
          timm = it->second;
        if (!timm.empty()) mapped = "blocks." + m[1].str() + "." + timm;
      }
    }
    if (mapped.empty()) {
      out.unused.push_back(name);
    } else {
      out.weights.emplace_back(mapped, t);
      out.source_keys[mapped] = name;
    }
  }
  for (const auto& [block, parts] : qkv) {
    for (const std::string kind : {"weight", "bias"}) {
      const bool any = parts.count("query." + kind) || parts.count("key." + kind) || parts.count("value." + kind);
      if (!any) continue;
      for (const std::string piece : {"query", "key", "value"}) {
        VIT_CHECK(parts.count(piece + "." + kind), "checkpoint", "{}: block {} has attention q/k/v {} but no '{}.{}'",
                  source, block, kind, piece, kind);
      }
      const std::string qkv_name = fmt::format("blocks.{}.attn.qkv.{}", block, kind);
      std::vector<std::string> pieces;
      for (const std::string piece : {"query", "key", "value"})
        pieces.push_back(sources.at(block).at(piece + "." + kind));
      for (const std::string piece : {"query", "key", "value"}) {
        const Tensor& part = parts.at(piece + "." + kind);
        const Tensor& first = parts.at("query." + kind);
        VIT_CHECK(part.dim() == first.dim() && (part.dim() < 2 || part.size(1) == first.size(1)), "checkpoint",
                  "{}: '{}' {} does not fit '{}' {} (q, k and v are stacked into {})", source,
                  sources.at(block).at(piece + "." + kind), shape_str(part.shape()), pieces[0],
                  shape_str(first.shape()), qkv_name);
      }
      out.weights.emplace_back(qkv_name,
                               cat({parts.at("query." + kind), parts.at("key." + kind), parts.at("value." + kind)}, 0));
      out.source_keys[qkv_name] = fmt::format("{}", fmt::join(pieces, " + "));
    }
  }
  if (layout == Layout::HuggingFace) {
    if (out.family == "clip") {
      out.eps = 1e-5;
      out.act = "quick_gelu";
      out.projection = find(out.weights, "head.weight") != nullptr;
    } else {
      out.eps = out.family == "dinov2" ? 1e-6 : 1e-12;
    }
    for (auto& [name, t] : out.weights) {
      // CLIP keeps its class embedding as (D) and its position table as (N, D).
      if (name == "cls_token" && t.dim() == 1) t = t.reshape({1, 1, t.size(0)});
      if (name == "pos_embed" && t.dim() == 2) t = t.reshape({1, t.size(0), t.size(1)});
    }
    // DINOv2 with registers: the position table covers the class token but not the registers;
    // as timm does, fold the class token's position into the token and keep the patch rows
    // (no_embed_class), so the registers need no position.
    const Tensor* reg = find(out.weights, "reg_token");
    Tensor* pos = nullptr;
    Tensor* cls = nullptr;
    for (auto& [name, t] : out.weights) {
      if (name == "pos_embed") pos = &t;
      if (name == "cls_token") cls = &t;
    }
    if (reg != nullptr && pos != nullptr && cls != nullptr && pos->dim() == 3 && pos->size(1) > 1 && cls->dim() == 3 &&
        cls->size(2) == pos->size(2)) {
      const auto patches = pos->size(1) - 1;
      const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(patches))));
      if (grid * grid == patches) {
        Tensor folded = cls->to(DType::F32).contiguous().clone();
        const Tensor first = pos->slice(1, 0, 1).to(DType::F32).contiguous();
        for (int64_t i = 0; i < folded.numel(); ++i) folded.data<float>()[i] += first.data<float>()[i];
        *cls = folded;
        *pos = pos->slice(1, 1, pos->size(1)).contiguous();
      }
    }
  }
  sort_registration_order(out.weights);
  return out;
}

Tensor resample_pos_embed(const Tensor& pos_embed, int64_t prefix_tokens, int64_t new_grid_h, int64_t new_grid_w,
                          bool align_corners, bool antialias) {
  VIT_CHECK(pos_embed.dim() == 3 && pos_embed.size(0) == 1, "pos_embed", "expected (1, N, D), got {}",
            shape_str(pos_embed.shape()));
  const int64_t D = pos_embed.size(2), patches = pos_embed.size(1) - prefix_tokens;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(patches))));
  VIT_CHECK(patches > 0 && grid * grid == patches, "pos_embed", "{} patch positions are not a square grid", patches);
  VIT_CHECK(new_grid_h > 0 && new_grid_w > 0, "pos_embed", "invalid target grid {}x{}", new_grid_h, new_grid_w);
  const Tensor pos = pos_embed.to(DType::F32).contiguous();
  // (1, gh*gw, D) -> (D, gh, gw) planes, resample, back to tokens.
  const Tensor planes =
      pos.slice(1, prefix_tokens, pos.size(1)).reshape({grid, grid, D}).permute({2, 0, 1}).contiguous();
  Tensor resampled = Tensor::empty({D, new_grid_h, new_grid_w});
  if (antialias) {
    VIT_CHECK(!align_corners, "pos_embed", "antialiased resampling has no align_corners form");
    kernels::bicubic_resize_antialias<float>(planes.data<float>(), D, grid, grid, resampled.data<float>(), new_grid_h,
                                             new_grid_w);
  } else {
    kernels::bicubic_resize<float>(planes.data<float>(), D, grid, grid, resampled.data<float>(), new_grid_h, new_grid_w,
                                   align_corners);
  }
  const Tensor tokens = resampled.permute({1, 2, 0}).reshape({1, new_grid_h * new_grid_w, D});
  return prefix_tokens > 0 ? cat({pos.slice(1, 0, prefix_tokens), tokens}, 1) : tokens.contiguous();
}

int64_t default_num_heads(int64_t dim) {
  switch (dim) {
    case 192:
      return 3;
    case 384:
      return 6;
    case 768:
      return 12;
    case 1024:
      return 16;
    case 1280:
      return 16;
    default:
      return 0;  // not a standard width: the head count cannot be told
  }
}

double default_eps(Layout layout) { return layout == Layout::HuggingFace ? 1e-12 : 1e-6; }

ViTConfig infer_config(const NamedTensors& w, Layout layout, int64_t num_heads, const std::string& source) {
  auto need = [&](const std::string& key) -> const Tensor& {
    const Tensor* t = find(w, key);
    VIT_CHECK(t != nullptr, "checkpoint", "{}: missing '{}' (needed to infer the model shape)", source, key);
    return *t;
  };
  ViTConfig c;
  c.name = fmt::format("{}-checkpoint", layout_name(layout));
  const Tensor& proj = need("patch_embed.proj.weight");
  VIT_CHECK(proj.dim() == 4 && proj.size(2) == proj.size(3), "checkpoint",
            "{}: patch_embed.proj.weight {} is not (D, C, P, P)", source, shape_str(proj.shape()));
  c.dim = proj.size(0);
  c.in_channels = proj.size(1);
  c.patch_size = proj.size(2);
  // vit's hybrid: stem.{0,2,..}.weight (S, C, 3, 3) convolutions before the patch embedding.
  while (const Tensor* conv = find(w, fmt::format("stem.{}.weight", 2 * c.stem_layers))) {
    VIT_CHECK(conv->dim() == 4 && conv->size(2) == 3 && conv->size(3) == 3, "checkpoint",
              "{}: stem.{}.weight {} is not (S, C, 3, 3)", source, 2 * c.stem_layers, shape_str(conv->shape()));
    if (c.stem_layers == 0) c.in_channels = conv->size(1);
    c.stem_channels = conv->size(0);
    ++c.stem_layers;
  }
  // The tokens in front of the patches, and how many rows of the position table they take.
  const bool has_cls = find(w, "cls_token") != nullptr;
  c.dist_token = find(w, "dist_token") != nullptr;
  if (const Tensor* reg = find(w, "reg_token")) {
    VIT_CHECK(reg->dim() == 3 && reg->size(0) == 1 && reg->size(2) == c.dim, "checkpoint",
              "{}: reg_token {} is not (1, R, {})", source, shape_str(reg->shape()), c.dim);
    c.reg_tokens = reg->size(1);
  }
  for (const char* token : {"cls_token", "dist_token"}) {
    const Tensor* t = find(w, token);
    VIT_CHECK(t == nullptr || (t->dim() == 3 && t->size(0) == 1 && t->size(1) == 1 && t->size(2) == c.dim),
              "checkpoint", "{}: {} {} is not (1, 1, {})", source, token, shape_str(t->shape()), c.dim);
  }
  c.pool = has_cls ? "cls" : "mean";
  if (find(w, "fc_norm.weight")) c.pool = has_cls ? "avg" : "mean";
  const Tensor& pos = need("pos_embed");
  VIT_CHECK(pos.dim() == 3 && pos.size(0) == 1 && pos.size(2) == c.dim, "checkpoint",
            "{}: pos_embed {} is not (1, N, {})", source, shape_str(pos.shape()), c.dim);
  const int64_t prefix = c.prefix_tokens();
  auto square = [](int64_t n) {
    const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(n, 0)))));
    return n > 0 && g * g == n ? g : int64_t{0};
  };
  // The table covers the prefix tokens too (timm's default), or the patches only (no_embed_class).
  int64_t grid = square(pos.size(1) - prefix);
  if (grid == 0 && prefix > 0 && square(pos.size(1)) > 0) {
    grid = square(pos.size(1));
    c.no_embed_class = true;
  }
  if (grid == 0) {
    std::vector<std::string> tokens;
    for (const char* token : {"cls_token", "dist_token", "reg_token"}) {
      if (const Tensor* t = find(w, token)) tokens.push_back(fmt::format("{} {}", token, shape_str(t->shape())));
    }
    fail("checkpoint",
         "{}: pos_embed {} does not fit the {} prefix token{} ({}) and a square grid of patches, with or without "
         "rows for the prefix",
         source, shape_str(pos.shape()), prefix, prefix == 1 ? "" : "s",
         tokens.empty() ? std::string("none") : fmt::format("{}", fmt::join(tokens, ", ")));
  }
  c.image_size = grid * c.patch_size;
  c.pre_norm = find(w, "norm_pre.weight") != nullptr;
  const bool patch_bias = find(w, "patch_embed.proj.bias") != nullptr;
  VIT_CHECK(patch_bias != c.pre_norm, "checkpoint",
            "{}: {} (a model with norm_pre has no patch-embedding bias; one without has one)", source,
            c.pre_norm ? "norm_pre and patch_embed.proj.bias together" : "no norm_pre and no patch_embed.proj.bias");
  c.depth = 0;
  while (find(w, fmt::format("blocks.{}.attn.qkv.weight", c.depth))) ++c.depth;
  VIT_CHECK(c.depth > 0, "checkpoint", "{}: no encoder blocks found", source);
  const Tensor& fc1 = need("blocks.0.mlp.fc1.weight");
  c.mlp_layers = find(w, "blocks.0.mlp.fc2.weight") != nullptr ? 2 : 1;
  c.mlp_dim = fc1.size(0);
  c.mlp_ratio = static_cast<double>(c.mlp_dim) / static_cast<double>(c.dim);
  c.qkv_bias = find(w, "blocks.0.attn.qkv.bias") != nullptr;
  c.qk_norm = find(w, "blocks.0.attn.q_norm.weight") != nullptr;
  if (find(w, "blocks.0.ls1.gamma") != nullptr) c.layer_scale = 1.0;  // the value is the checkpoint's
  const Tensor& norm1 = need("blocks.0.norm1.weight");
  c.norm_tokens = norm1.dim() == 2;
  c.final_norm = find(w, "norm.weight") != nullptr || find(w, "fc_norm.weight") != nullptr;
  if (const Tensor* pre = find(w, "pre_logits.fc.weight")) c.representation_size = pre->size(0);
  if (const Tensor* head = find(w, "head.weight")) {
    c.num_classes = head->size(0);
    c.head_bias = find(w, "head.bias") != nullptr;
  } else {
    c.num_classes = 0;  // a feature extractor (DINOv2, CLIP without its projection)
  }
  c.num_heads = num_heads > 0 ? num_heads : default_num_heads(c.dim);
  VIT_CHECK(c.num_heads > 0, "checkpoint",
            "{}: width {} is not a standard ViT width (192, 384, 768, 1024, 1280); its "
            "number of attention heads cannot be inferred: pass --heads",
            source, c.dim);
  // q, k and v of all heads: 3 x heads x head_dim rows.
  const Tensor& qkv = need("blocks.0.attn.qkv.weight");
  VIT_CHECK(qkv.dim() == 2 && qkv.size(0) % 3 == 0 && qkv.size(1) == c.dim, "checkpoint",
            "{}: blocks.0.attn.qkv.weight {} is not (3 x heads x head_dim, {})", source, shape_str(qkv.shape()), c.dim);
  const int64_t attn_width = qkv.size(0) / 3;
  VIT_CHECK(attn_width % c.num_heads == 0, "checkpoint",
            "{}: the attention width {} (blocks.0.attn.qkv.weight {}) is not divisible by {} heads (--heads)", source,
            attn_width, shape_str(qkv.shape()), c.num_heads);
  if (attn_width != c.dim || c.dim % c.num_heads != 0) c.dim_head = attn_width / c.num_heads;
  c.eps = default_eps(layout);
  c.validate();
  return c;
}

}  // namespace vit::model
