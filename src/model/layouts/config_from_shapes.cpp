// What timm-named weights' tensor shapes tell of their model: the config, the standard head count
// of a width, the eps of a layout (see config_from_shapes.h).
#include "model/layouts/config_from_shapes.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/check.h"
#include "model/layouts/sources.h"

namespace vit::model {

using layouts::find;

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

namespace {

// The number of encoder blocks: one more than the highest "blocks.N." index, every index below it
// present ("blocks 0-2 and 4-11: no keys of block 3" rather than block 4's keys as unexpected).
int64_t block_count(const NamedTensors& w, const std::string& source) {
  std::set<int64_t> seen;
  for (const auto& [name, t] : w) {
    if (name.rfind("blocks.", 0) != 0) continue;
    const size_t end = name.find('.', 7);
    const std::string digits = name.substr(7, end == std::string::npos ? std::string::npos : end - 7);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    seen.insert(std::stoll(digits));
  }
  VIT_CHECK(!seen.empty(), "checkpoint", "{}: no encoder blocks found (no 'blocks.N.' keys)", source);
  const int64_t depth = *seen.rbegin() + 1;
  std::vector<int64_t> gaps;
  for (int64_t i = 0; i < depth; ++i) {
    if (!seen.count(i)) gaps.push_back(i);
  }
  if (gaps.empty()) return depth;
  const size_t shown = std::min<size_t>(gaps.size(), 8);
  fail("checkpoint", "{}: blocks numbered up to {}, but no keys of block{} {}{} (missing: 'blocks.{}.*')", source,
       depth - 1, gaps.size() == 1 ? "" : "s", fmt::join(gaps.begin(), gaps.begin() + static_cast<long>(shown), ", "),
       gaps.size() > shown ? fmt::format(" and {} more", gaps.size() - shown) : "", gaps[0]);
  return depth;
}

// Whether some blocks.{i}.{key} with i < depth is there: one pass over the keys (a lookup per
// block would scan them depth times).
bool in_any_block(const NamedTensors& w, int64_t depth, const std::string& key) {
  for (const auto& [name, t] : w) {
    if (name.rfind("blocks.", 0) != 0 || name.size() <= key.size() + 8) continue;
    const size_t dot = name.size() - key.size() - 1;
    if (name[dot] != '.' || name.compare(dot + 1, std::string::npos, key) != 0) continue;
    const std::string digits = name.substr(7, dot - 7);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoll(digits) < depth) return true;
  }
  return false;
}

// A tensor the config cannot be inferred without.
const Tensor& need(const NamedTensors& w, const std::string& key, const std::string& source) {
  const Tensor* t = find(w, key);
  VIT_CHECK(t != nullptr, "checkpoint", "{}: missing '{}' (needed to infer the model shape)", source, key);
  return *t;
}

// The side of a square grid of n positions; 0 when n is not a square.
int64_t square_side(int64_t n) {
  const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(n, 0)))));
  return n > 0 && g * g == n ? g : int64_t{0};
}

// The patch projection (D, C, P, P): width, input channels, patch size; and vit's hybrid stem,
// stem.{0,2,..}.weight (S, C, 3, 3) convolutions before it.
void read_patch_embedding(const NamedTensors& w, const std::string& source, ViTConfig& c) {
  const Tensor& proj = need(w, "patch_embed.proj.weight", source);
  VIT_CHECK(proj.dim() == 4 && proj.size(2) == proj.size(3), "checkpoint",
            "{}: patch_embed.proj.weight {} is not (D, C, P, P)", source, shape_str(proj.shape()));
  c.dim = proj.size(0);
  c.in_channels = proj.size(1);
  c.patch_size = proj.size(2);
  while (const Tensor* conv = find(w, fmt::format("stem.{}.weight", 2 * c.stem_layers))) {
    VIT_CHECK(conv->dim() == 4 && conv->size(2) == 3 && conv->size(3) == 3, "checkpoint",
              "{}: stem.{}.weight {} is not (S, C, 3, 3)", source, 2 * c.stem_layers, shape_str(conv->shape()));
    if (c.stem_layers == 0) c.in_channels = conv->size(1);
    c.stem_channels = conv->size(0);
    ++c.stem_layers;
  }
  // A hybrid's backbone (model/backbone.h): its stem convolution, stages.{s}.{b} residual blocks.
  // The stem's stride is in no weight's shape: 1 is assumed here (patch_size and image_size then in
  // units of the stem's output); a checkpoint's own config says it (read_checkpoint.cpp).
  if (const Tensor* stem = find(w, "backbone.stem.conv.weight")) {
    VIT_CHECK(stem->dim() == 4 && stem->size(2) == 3 && stem->size(3) == 3, "checkpoint",
              "{}: backbone.stem.conv.weight {} is not (C, C_in, 3, 3)", source, shape_str(stem->shape()));
    c.in_channels = stem->size(1);
    c.conv_channels = stem->size(0);
    while (c.conv_stages < 6 && find(w, fmt::format("backbone.stages.{}.0.conv1.weight", c.conv_stages)))
      ++c.conv_stages;
    while (c.conv_blocks < 17 && find(w, fmt::format("backbone.stages.0.{}.conv1.weight", c.conv_blocks)))
      ++c.conv_blocks;
    VIT_CHECK(c.conv_stages >= 1 && c.conv_stages <= 5, "checkpoint", "{}: a backbone of {} stages (1 to 5 are built)",
              source, c.conv_stages);
    c.patch_size *= c.feature_stride();
  }
}

// The tokens in front of the patches (cls, dist, reg) and the pooling they imply (fc_norm: avg).
void read_prefix_tokens(const NamedTensors& w, const std::string& source, ViTConfig& c) {
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
}

// The position table: how many rows the prefix tokens take, and the square grid of patches (the
// image size). The table covers the prefix tokens too (timm's default), or the patches only
// (no_embed_class).
void read_position_table(const NamedTensors& w, const std::string& source, ViTConfig& c) {
  const Tensor& pos = need(w, "pos_embed", source);
  VIT_CHECK(pos.dim() == 3 && pos.size(0) == 1 && pos.size(2) == c.dim, "checkpoint",
            "{}: pos_embed {} is not (1, N, {})", source, shape_str(pos.shape()), c.dim);
  const int64_t prefix = c.prefix_tokens();
  int64_t grid = square_side(pos.size(1) - prefix);
  if (grid == 0 && prefix > 0 && square_side(pos.size(1)) > 0) {
    grid = square_side(pos.size(1));
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
}

// norm_pre (CLIP's pre-LayerNorm) replaces the patch embedding's bias: exactly one of them.
void read_norm_pre(const NamedTensors& w, const std::string& source, ViTConfig& c) {
  c.pre_norm = find(w, "norm_pre.weight") != nullptr;
  const bool patch_bias = find(w, "patch_embed.proj.bias") != nullptr;
  VIT_CHECK(patch_bias != c.pre_norm, "checkpoint",
            "{}: {} (a model with norm_pre has no patch-embedding bias; one without has one)", source,
            c.pre_norm ? "norm_pre and patch_embed.proj.bias together" : "no norm_pre and no patch_embed.proj.bias");
}

// The encoder blocks: their count, the MLP (one or two Linears, its width), and the optional parts.
void read_blocks(const NamedTensors& w, const std::string& source, ViTConfig& c) {
  c.depth = block_count(w, source);
  const Tensor& fc1 = need(w, "blocks.0.mlp.fc1.weight", source);
  VIT_CHECK(fc1.dim() == 2, "checkpoint", "{}: blocks.0.mlp.fc1.weight is {}: (mlp width, {}) is expected", source,
            shape_str(fc1.shape()), c.dim);
  // The blocks' optional parts: any block's say the model has them, so one block without its own
  // is reported missing by name (never another block's as unexpected).
  c.mlp_layers = in_any_block(w, c.depth, "mlp.fc2.weight") ? 2 : 1;
  c.mlp_dim = fc1.size(0);
  c.mlp_ratio = static_cast<double>(c.mlp_dim) / static_cast<double>(c.dim);
  c.qkv_bias = in_any_block(w, c.depth, "attn.qkv.bias");
  c.qk_norm = in_any_block(w, c.depth, "attn.q_norm.weight");
  if (in_any_block(w, c.depth, "ls1.gamma")) c.layer_scale = 1.0;  // the value is the checkpoint's
  const Tensor& norm1 = need(w, "blocks.0.norm1.weight", source);
  c.norm_tokens = norm1.dim() == 2;
}

// After the blocks: the final norm, pre-logits and the classifier head (none: a feature extractor).
void read_head(const NamedTensors& w, const std::string& source, ViTConfig& c) {
  c.final_norm = find(w, "norm.weight") != nullptr || find(w, "fc_norm.weight") != nullptr;
  for (const char* key : {"pre_logits.fc.weight", "head.weight"}) {
    const Tensor* t = find(w, key);
    VIT_CHECK(t == nullptr || t->dim() == 2, "checkpoint", "{}: {} is {}: (outputs, inputs) is expected", source, key,
              shape_str(t->shape()));
  }
  if (const Tensor* pre = find(w, "pre_logits.fc.weight")) c.representation_size = pre->size(0);
  if (const Tensor* head = find(w, "head.weight")) {
    c.num_classes = head->size(0);
    c.head_bias = find(w, "head.bias") != nullptr;
  } else {
    c.num_classes = 0;  // a feature extractor (DINOv2, CLIP without its projection)
  }
}

// The attention heads (given, or the standard count of the width) and the head width, from q, k
// and v of all heads: 3 x heads x head_dim rows.
void read_attention_heads(const NamedTensors& w, int64_t num_heads, const std::string& source, ViTConfig& c) {
  c.num_heads = num_heads > 0 ? num_heads : default_num_heads(c.dim);
  VIT_CHECK(c.num_heads > 0, "checkpoint",
            "{}: width {} is not a standard ViT width (192, 384, 768, 1024, 1280); its "
            "number of attention heads cannot be inferred: pass --heads",
            source, c.dim);
  const Tensor& qkv = need(w, "blocks.0.attn.qkv.weight", source);
  VIT_CHECK(qkv.dim() == 2 && qkv.size(0) % 3 == 0 && qkv.size(1) == c.dim, "checkpoint",
            "{}: blocks.0.attn.qkv.weight {} is not (3 x heads x head_dim, {})", source, shape_str(qkv.shape()), c.dim);
  const int64_t attn_width = qkv.size(0) / 3;
  VIT_CHECK(attn_width % c.num_heads == 0, "checkpoint",
            "{}: the attention width {} (blocks.0.attn.qkv.weight {}) is not divisible by {} heads (--heads)", source,
            attn_width, shape_str(qkv.shape()), c.num_heads);
  if (attn_width != c.dim || c.dim % c.num_heads != 0) c.dim_head = attn_width / c.num_heads;
}

}  // namespace

double default_eps(Layout layout) { return layout == Layout::HuggingFace ? 1e-12 : 1e-6; }

ViTConfig infer_config(const NamedTensors& w, Layout layout, int64_t num_heads, const std::string& source) {
  ViTConfig c;
  c.name = fmt::format("{}-checkpoint", layout_name(layout));
  read_patch_embedding(w, source, c);
  read_prefix_tokens(w, source, c);
  read_position_table(w, source, c);
  read_norm_pre(w, source, c);
  read_blocks(w, source, c);
  read_head(w, source, c);
  read_attention_heads(w, num_heads, source, c);
  c.eps = default_eps(layout);
  c.validate();
  return c;
}

}  // namespace vit::model
