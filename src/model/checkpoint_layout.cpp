// Layout detection, renaming and config inference (see checkpoint_layout.h).
#include "model/checkpoint_layout.h"

#include <algorithm>
#include <cmath>
#include <map>
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

Layout detect_layout(const NamedTensors& tensors, const std::string& source) {
  for (const auto& [name, _] : tensors) {
    if (name == "class_token" || has_prefix(name, "encoder.layers.") || name == "conv_proj.weight")
      return Layout::Torchvision;
    if (has_prefix(name, "vit.embeddings.") || has_prefix(name, "embeddings.patch_embeddings.") ||
        has_prefix(name, "vit.encoder.layer.") || has_prefix(name, "encoder.layer."))
      return Layout::HuggingFace;
  }
  for (const auto& [name, _] : tensors) {
    if (name == "pos_embed" || name == "patch_embed.proj.weight" || has_prefix(name, "blocks.")) return Layout::Timm;
  }
  fail("checkpoint", "{}: not a ViT checkpoint of a known layout (no timm, torchvision or Hugging Face ViT keys)",
       source);
}

Converted to_timm(const NamedTensors& tensors, Layout layout, const std::string& source) {
  Converted out;
  if (layout == Layout::Timm) {
    out.weights = tensors;
    return out;
  }
  static const std::regex tv_block(R"(encoder\.layers\.encoder_layer_(\d+)\.(.+))");
  static const std::regex hf_block(R"((?:vit\.)?encoder\.layer\.(\d+)\.(.+))");
  // Hugging Face q/k/v pieces per block, concatenated once all three are seen.
  std::map<int64_t, std::map<std::string, Tensor>> qkv;
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
      const std::string key = has_prefix(name, "vit.") ? name.substr(4) : name;
      mapped = timm_name(top_level_keys(), key, layout);
      if (mapped.empty() && std::regex_match(name, m, hf_block)) {
        const std::string rest = m[2];
        static const std::regex qkv_part(R"(attention\.attention\.(query|key|value)\.(weight|bias))");
        std::smatch q;
        if (std::regex_match(rest, q, qkv_part)) {
          qkv[std::stoll(m[1])][q[1].str() + "." + q[2].str()] = t;
          continue;
        }
        if (const std::string timm = timm_name(block_keys(), rest, layout); !timm.empty()) {
          mapped = "blocks." + m[1].str() + "." + timm;
        }
      }
    }
    if (mapped.empty()) {
      out.unused.push_back(name);
    } else {
      out.weights.emplace_back(mapped, t);
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
      out.weights.emplace_back(fmt::format("blocks.{}.attn.qkv.{}", block, kind),
                               cat({parts.at("query." + kind), parts.at("key." + kind), parts.at("value." + kind)}, 0));
    }
  }
  // Bring the result into registration order (cls_token, pos_embed, patch_embed, blocks by index, ...).
  auto rank = [](const std::string& n) -> std::tuple<int, int64_t, std::string> {
    if (n == "cls_token") return {0, 0, n};
    if (n == "pos_embed") return {1, 0, n};
    if (has_prefix(n, "stem.") || has_prefix(n, "patch_embed.")) return {2, 0, n};
    if (has_prefix(n, "blocks.")) return {3, std::stoll(n.substr(7, n.find('.', 7) - 7)), n};
    return {4, 0, n};
  };
  std::stable_sort(out.weights.begin(), out.weights.end(), [&](const auto& a, const auto& b) {
    const auto ra = rank(a.first), rb = rank(b.first);
    return std::get<0>(ra) != std::get<0>(rb) ? std::get<0>(ra) < std::get<0>(rb) : std::get<1>(ra) < std::get<1>(rb);
  });
  return out;
}

Tensor resample_pos_embed(const Tensor& pos_embed, int64_t prefix_tokens, int64_t new_grid_h, int64_t new_grid_w,
                          bool align_corners) {
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
  kernels::bicubic_resize<float>(planes.data<float>(), D, grid, grid, resampled.data<float>(), new_grid_h, new_grid_w,
                                 align_corners);
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
  const Tensor& pos = need("pos_embed");
  VIT_CHECK(pos.dim() == 3 && pos.size(0) == 1 && pos.size(2) == c.dim, "checkpoint",
            "{}: pos_embed {} is not (1, N, {})", source, shape_str(pos.shape()), c.dim);
  const bool has_cls = find(w, "cls_token") != nullptr;
  c.pool = has_cls ? "cls" : "mean";
  const int64_t patches = pos.size(1) - (has_cls ? 1 : 0);
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(patches))));
  VIT_CHECK(grid * grid == patches, "checkpoint", "{}: pos_embed has {} patch positions, not a square grid", source,
            patches);
  c.image_size = grid * c.patch_size;
  c.depth = 0;
  while (find(w, fmt::format("blocks.{}.attn.qkv.weight", c.depth))) ++c.depth;
  VIT_CHECK(c.depth > 0, "checkpoint", "{}: no encoder blocks found", source);
  c.mlp_dim = need("blocks.0.mlp.fc1.weight").size(0);
  c.mlp_ratio = static_cast<double>(c.mlp_dim) / static_cast<double>(c.dim);
  c.qkv_bias = find(w, "blocks.0.attn.qkv.bias") != nullptr;
  if (const Tensor* pre = find(w, "pre_logits.fc.weight")) c.representation_size = pre->size(0);
  const Tensor* head = find(w, "head.weight");
  VIT_CHECK(head != nullptr, "checkpoint",
            "{}: no classification head ('head.weight' / 'heads.head.weight' / "
            "'classifier.weight')",
            source);
  c.num_classes = head->size(0);
  c.num_heads = num_heads > 0 ? num_heads : default_num_heads(c.dim);
  VIT_CHECK(c.num_heads > 0, "checkpoint",
            "{}: width {} is not a standard ViT width (192, 384, 768, 1024, 1280); its "
            "number of attention heads cannot be inferred: pass --heads",
            source, c.dim);
  c.eps = default_eps(layout);
  if (find(w, "fc_norm.weight")) c.pool = "mean";
  c.validate();
  return c;
}

}  // namespace vit::model
