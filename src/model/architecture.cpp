// The parameter table of a ViTConfig and what is derived from it (see architecture.h).
#include "model/architecture.h"

#include <algorithm>

#include "core/check.h"
#include "core/system.h"

namespace vit::model {
namespace {

// Element count in double: absurd configs overflow int64 (they are refused by size, not UB).
double elements(const Shape& shape) {
  double n = 1.0;
  for (int64_t s : shape) n *= static_cast<double>(s);
  return n;
}

double count(const std::vector<ParameterSpec>& specs) {
  double n = 0.0;
  for (const ParameterSpec& p : specs) n += elements(p.shape);
  return n;
}

bool has_prefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Multiply-accumulates per image of the weights whose names start with `prefix`.
int64_t matmul_macs(const std::vector<ParameterSpec>& specs, const std::string& prefix = "") {
  int64_t macs = 0;
  for (const ParameterSpec& p : specs) {
    if (p.rows > 0 && has_prefix(p.name, prefix)) macs += p.rows * shape_numel(p.shape);
  }
  return macs;
}

std::string part_of(const std::string& name) { return name.substr(0, name.find('.')); }

// Values per image a hybrid's backbone holds: in training every convolution keeps its input rows
// (k*k per input channel and output pixel) and its convolution, BatchNorm and ReLU outputs; in
// inference the largest layer's rows and two maps. 0 without a backbone.
double backbone_activations(const ViTConfig& c, bool training) {
  double total = 0.0, largest = 0.0;
  for (const ParameterSpec& p : architecture_spec(c).before_blocks) {
    if (p.rows == 0 || !has_prefix(p.name, "backbone.")) continue;
    const double rows = static_cast<double>(p.rows), in = static_cast<double>(p.shape[1] * p.shape[2] * p.shape[3]),
                 out = static_cast<double>(p.shape[0]);
    total += rows * (in + 3 * out);
    largest = std::max(largest, rows * (in + 2 * out));
  }
  return training ? total : largest;
}

}  // namespace

ArchitectureSpec architecture_spec(const ViTConfig& c) {
  const int64_t D = c.dim, F = c.hidden_dim(), N = c.num_tokens(), K = c.num_classes, R = c.representation_size,
                A = c.attn_dim(), HD = c.head_dim();
  ArchitectureSpec s;
  // x (B, C, H, W) -> patch_embed (B, P, D) -> [cls, dist, reg; x] + pos_embed (B, N, D)
  if (c.class_token()) s.before_blocks.push_back({"cls_token", {1, 1, D}});
  if (c.dist_token) s.before_blocks.push_back({"dist_token", {1, 1, D}});
  if (c.reg_tokens > 0) s.before_blocks.push_back({"reg_token", {1, c.reg_tokens, D}});
  s.before_blocks.push_back({"pos_embed", {1, c.pos_tokens(), D}});
  // [stem: 3x3 convolutions (stride 1, padding 1), each on every pixel, GELU between]
  int64_t channels = c.in_channels;
  for (int64_t i = 0; i < c.stem_layers; ++i) {
    const std::string conv = fmt::format("stem.{}.", 2 * i);  // stem.{2i} conv, stem.{2i+1} GELU
    s.before_blocks.push_back({conv + "weight", {c.stem_channels, channels, 3, 3}, c.image_size * c.image_size});
    s.before_blocks.push_back({conv + "bias", {c.stem_channels}});
    channels = c.stem_channels;
  }
  // [a hybrid's backbone (backbone.h): each convolution on every pixel of its output map, a
  // BatchNorm's weight and bias after each (their running statistics are buffers, not parameters)]
  if (c.hybrid()) {
    auto conv_bn = [&](const std::string& conv, const std::string& bn, int64_t out, int64_t in, int64_t k,
                       int64_t size) {
      s.before_blocks.push_back({"backbone." + conv + ".weight", {out, in, k, k}, size * size});
      s.before_blocks.push_back({"backbone." + bn + ".weight", {out}});
      s.before_blocks.push_back({"backbone." + bn + ".bias", {out}});
    };
    const int64_t stem_size = c.image_size / c.conv_stem_stride;
    conv_bn("stem.conv", "stem.bn", c.conv_channels, c.in_channels, 3, stem_size);
    channels = c.conv_channels;
    for (int64_t st = 0; st < c.conv_stages; ++st) {
      const int64_t out = c.conv_channels << st, size = stem_size >> st;
      for (int64_t b = 0; b < c.conv_blocks; ++b) {
        const std::string block = fmt::format("stages.{}.{}.", st, b);
        conv_bn(block + "conv1", block + "bn1", out, channels, 3, size);
        conv_bn(block + "conv2", block + "bn2", out, out, 3, size);
        if (channels != out) conv_bn(block + "downsample.conv", block + "downsample.bn", out, channels, 1, size);
        channels = out;
      }
    }
  }
  s.before_blocks.push_back(
      {"patch_embed.proj.weight", {D, c.embed_channels(), c.embed_patch(), c.embed_patch()}, c.num_patches()});
  if (!c.pre_norm) s.before_blocks.push_back({"patch_embed.proj.bias", {D}});
  if (c.pre_norm) {
    s.before_blocks.push_back({"norm_pre.weight", {D}});
    s.before_blocks.push_back({"norm_pre.bias", {D}});
  }
  // Pre-norm encoder block on (B, N, D): every Linear sees all N tokens. Its LayerNorms cover one
  // token's D channels, or (the ViT notebook) all N x D values of an image.
  const Shape block_norm = c.norm_tokens ? Shape{N, D} : Shape{D};
  s.depth = c.depth;
  s.block.push_back({"norm1.weight", block_norm});
  s.block.push_back({"norm1.bias", block_norm});
  s.block.push_back({"attn.qkv.weight", {3 * A, D}, N});
  if (c.qkv_bias) s.block.push_back({"attn.qkv.bias", {3 * A}});
  if (c.qk_norm) {
    for (const char* n : {"attn.q_norm.weight", "attn.q_norm.bias", "attn.k_norm.weight", "attn.k_norm.bias"}) {
      s.block.push_back({n, {HD}});
    }
  }
  s.block.push_back({"attn.proj.weight", {D, A}, N});
  s.block.push_back({"attn.proj.bias", {D}});
  if (c.layer_scale > 0) s.block.push_back({"ls1.gamma", {D}});
  s.block.push_back({"norm2.weight", block_norm});
  s.block.push_back({"norm2.bias", block_norm});
  if (c.mlp_layers == 1) {
    s.block.push_back({"mlp.fc1.weight", {D, D}, N});
    s.block.push_back({"mlp.fc1.bias", {D}});
  } else {
    s.block.push_back({"mlp.fc1.weight", {F, D}, N});
    s.block.push_back({"mlp.fc1.bias", {F}});
    s.block.push_back({"mlp.fc2.weight", {D, F}, N});
    s.block.push_back({"mlp.fc2.bias", {D}});
  }
  if (c.layer_scale > 0) s.block.push_back({"ls2.gamma", {D}});
  // Pooling (class row after norm, or patch mean then fc_norm) -> [pre_logits] -> head [+ head_dist]:
  // one row each (the distillation head reads the distillation token's row).
  if (c.final_norm) {
    const std::string final_norm = c.pool_kind() == PoolKind::Cls ? "norm" : "fc_norm";
    s.after_blocks.push_back({final_norm + ".weight", {D}});
    s.after_blocks.push_back({final_norm + ".bias", {D}});
  }
  if (R > 0) {
    s.after_blocks.push_back({"pre_logits.fc.weight", {R, D}, 1});
    s.after_blocks.push_back({"pre_logits.fc.bias", {R}});
  }
  if (K > 0) {
    s.after_blocks.push_back({"head.weight", {K, R > 0 ? R : D}, 1});
    if (c.head_bias) s.after_blocks.push_back({"head.bias", {K}});
  }
  if (c.dist_token) {
    s.after_blocks.push_back({"head_dist.weight", {K, D}, 1});
    s.after_blocks.push_back({"head_dist.bias", {K}});
  }
  return s;
}

std::vector<ParameterSpec> parameter_specs(const ViTConfig& c) {
  const ArchitectureSpec s = architecture_spec(c);
  std::vector<ParameterSpec> all = s.before_blocks;
  for (int64_t i = 0; i < s.depth; ++i) {
    for (ParameterSpec p : s.block) {
      p.name = fmt::format("blocks.{}.{}", i, p.name);
      all.push_back(std::move(p));
    }
  }
  all.insert(all.end(), s.after_blocks.begin(), s.after_blocks.end());
  return all;
}

std::vector<ParameterSpec> buffer_specs(const ViTConfig& c) {
  std::vector<ParameterSpec> out;
  if (!c.hybrid()) return out;
  for (const ParameterSpec& p : architecture_spec(c).before_blocks) {
    const std::string& n = p.name;
    const size_t last = n.rfind('.'), layer = n.rfind('.', last - 1);
    if (!has_prefix(n, "backbone.") || n.compare(last, std::string::npos, ".weight") != 0 ||
        n.compare(layer + 1, 2, "bn") != 0)
      continue;
    const std::string base = n.substr(0, last + 1);
    out.push_back({base + "running_mean", p.shape});
    out.push_back({base + "running_var", p.shape});
  }
  return out;
}

double state_count(const ViTConfig& c) { return parameter_count(c) + count(buffer_specs(c)); }

double parameter_count(const ViTConfig& c) {
  const ArchitectureSpec s = architecture_spec(c);
  return count(s.before_blocks) + static_cast<double>(s.depth) * count(s.block) + count(s.after_blocks);
}

int64_t parameters_per_block(const ViTConfig& c) {
  int64_t n = 0;
  for (const ParameterSpec& p : architecture_spec(c).block) n += shape_numel(p.shape);
  return n;
}

std::vector<std::pair<std::string, int64_t>> parameters_by_part(const ViTConfig& c) {
  const ArchitectureSpec s = architecture_spec(c);
  std::vector<std::pair<std::string, int64_t>> parts;
  auto add = [&parts](const std::string& part, int64_t n) {
    if (parts.empty() || parts.back().first != part) parts.emplace_back(part, 0);
    parts.back().second += n;
  };
  for (const ParameterSpec& p : s.before_blocks) add(part_of(p.name), shape_numel(p.shape));
  if (s.depth > 0) add("blocks", s.depth * parameters_per_block(c));
  for (const ParameterSpec& p : s.after_blocks) add(part_of(p.name), shape_numel(p.shape));
  return parts;
}

ComputeCost macs_per_image(const ViTConfig& c) {
  const ArchitectureSpec s = architecture_spec(c);
  const int64_t N = c.num_tokens(), A = c.attn_dim();
  const int64_t attention_weights = matmul_macs(s.block, "attn."), mlp_weights = matmul_macs(s.block, "mlp.");
  VIT_ASSERT(attention_weights + mlp_weights == matmul_macs(s.block));  // every block weight counted once
  ComputeCost cost;
  cost.stem = matmul_macs(s.before_blocks, "stem.") + matmul_macs(s.before_blocks, "backbone.");
  cost.patch_embed = matmul_macs(s.before_blocks, "patch_embed.");
  VIT_ASSERT(cost.stem + cost.patch_embed == matmul_macs(s.before_blocks));
  // Per block: the attention's weights (qkv, proj), then q k^T and probabilities @ v, each
  // (N x N) over the NH x HD channels; the MLP's fc1 and fc2.
  cost.attention = s.depth * (attention_weights + 2 * N * N * A);
  cost.mlp = s.depth * mlp_weights;
  cost.head = matmul_macs(s.after_blocks);
  return cost;
}

std::string MemoryEstimate::describe() const {
  std::string s = "weights " + bytes_str(weights);
  if (training_state > 0) s += ", gradients + optimizer state + EMA " + bytes_str(training_state);
  return s + ", activations for the batch " + bytes_str(activations);
}

MemoryEstimate memory_estimate(const ViTConfig& c, int64_t batch, bool training) {
  const double D = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim()),
               N = static_cast<double>(c.num_tokens()), H = static_cast<double>(c.num_heads),
               A = static_cast<double>(c.attn_dim()), B = static_cast<double>(batch), L = static_cast<double>(c.depth),
               pixels = static_cast<double>(c.in_channels) * static_cast<double>(c.image_size) *
                        static_cast<double>(c.image_size);
  MemoryEstimate m;
  m.weights = 4 * parameter_count(c);
  if (training) {
    m.training_state = 4 * m.weights;  // gradient, AdamW m and v, EMA
    // Per block the backward pass keeps: two LayerNorm inputs/outputs, qkv, attention scores and
    // probabilities, attention output, projection, residuals, fc1 and GELU outputs, fc2 output.
    const double per_block = N * (7 * D + 3 * A + 2 * F) + 2 * H * N * N;
    // A stem layer keeps its input rows (9 per input value), its convolution and GELU outputs.
    const double stem = static_cast<double>(c.stem_layers) * static_cast<double>(c.image_size) *
                        static_cast<double>(c.image_size) * 11.0 * static_cast<double>(c.stem_channels);
    m.activations = 4 * B * (L * per_block + 2 * pixels + stem + backbone_activations(c, true) + 3 * N * D);
  } else {
    // One block at a time: qkv, scores, the MLP hidden layer, residual streams, and the input.
    const double stem = c.stem_layers > 0 ? static_cast<double>(c.image_size) * static_cast<double>(c.image_size) *
                                                12.0 * static_cast<double>(c.stem_channels)
                                          : 0.0;
    m.activations = 4 * B * (N * (2 * D + 4 * A + F) + H * N * N + 2 * pixels + stem + backbone_activations(c, false));
  }
  return m;
}

void check_memory(const ViTConfig& c, int64_t batch, bool training) {
  const MemoryEstimate m = memory_estimate(c, batch, training);
  check_fits_in_memory(
      m.total(),
      fmt::format("{} {} with batch {} ({})", training ? "training" : "running", c.name, batch, m.describe()),
      training ? "; use a smaller --batch-size or model" : "; use a smaller batch or model");
}

}  // namespace vit::model
