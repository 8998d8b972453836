// The ViT forward as an ONNX graph (see onnx_export.h), stage by stage as the inference session
// runs it (vit_stages.h): [stem | backbone] -> patch embedding -> prefix tokens and positions ->
// [norm_pre] -> blocks -> final norm -> pooling -> [pre_logits] -> head.
#include "infer/onnx_export_graph.h"

#include <cmath>

#include "core/check.h"
#include "infer/onnx_builder.h"

namespace vit::infer::onnx_export {

namespace {

using B = GraphBuilder;

// A convolution with its BatchNorm folded in (the hybrid's backbone), then ReLU unless `last`.
std::string conv_bn(GraphBuilder& g, const std::string& scope, const std::string& x, const nn::Conv2d& conv,
                    const nn::BatchNorm2d& bn) {
  const model::FoldedConv f = model::fold_conv_bn(conv, bn);
  const int64_t k = conv.kernel_size, p = conv.padding, s = conv.stride;
  return g.node(scope, "Conv", {x, g.initializer(scope + ".weight", f.weight), g.initializer(scope + ".bias", f.bias)},
                {B::attr("kernel_shape", {k, k}), B::attr("pads", {p, p, p, p}), B::attr("strides", {s, s})});
}

std::string conv(GraphBuilder& g, const std::string& scope, const std::string& x, const nn::Conv2d& c) {
  std::vector<std::string> inputs{x, g.initializer(scope + ".weight", c.weight.data().contiguous().to(DType::F32))};
  if (c.bias.defined()) inputs.push_back(g.initializer(scope + ".bias", c.bias.data()));
  const int64_t k = c.kernel_size, p = c.padding, s = c.stride;
  return g.node(scope, "Conv", inputs,
                {B::attr("kernel_shape", {k, k}), B::attr("pads", {p, p, p, p}), B::attr("strides", {s, s})});
}

// images (B, C, H, W) -> the map the patch embedding reads.
std::string stem_and_backbone(GraphBuilder& g, const model::VisionTransformer& m, std::string x) {
  if (m.stem) {  // (Conv2d 3x3 + GELU) x stem_layers
    const auto children = m.stem->named_children();
    for (size_t i = 0; i < children.size(); ++i) {
      const std::string scope = "stem." + children[i].first;
      if (auto* c = dynamic_cast<const nn::Conv2d*>(children[i].second.get())) {
        x = conv(g, scope, x, *c);
      } else {
        x = g.gelu(scope, x);
      }
    }
  }
  if (!m.backbone) return x;
  const model::ConvBackbone& bb = *m.backbone;
  x = g.node("backbone.stem", "Relu", {conv_bn(g, "backbone.stem.conv", x, *bb.stem->conv, *bb.stem->bn)});
  for (const auto& [stage_name, stage] : bb.stages->named_children()) {
    for (const auto& [block_name, module] : stage->named_children()) {
      const auto& block = dynamic_cast<const model::BasicBlock&>(*module);
      const std::string scope = "backbone.stages." + stage_name + "." + block_name;
      const std::string mid = g.node(scope, "Relu", {conv_bn(g, scope + ".conv1", x, *block.conv1, *block.bn1)});
      const std::string branch = conv_bn(g, scope + ".conv2", mid, *block.conv2, *block.bn2);
      const std::string shortcut =
          block.downsample ? conv_bn(g, scope + ".downsample.conv", x, *block.downsample->conv, *block.downsample->bn)
                           : x;
      x = g.node(scope, "Relu", {g.node(scope, "Add", {branch, shortcut})});
    }
  }
  return x;
}

// x (B, N, D) += [ls] branch
std::string residual(GraphBuilder& g, const std::string& scope, const std::string& x, std::string branch,
                     const std::shared_ptr<nn::LayerScale>& ls) {
  if (ls) branch = g.node(scope, "Mul", {branch, g.initializer(scope + ".gamma", ls->gamma.data())});
  return g.node(scope, "Add", {x, branch});
}

std::string attention(GraphBuilder& g, const std::string& scope, const std::string& h,
                      const nn::MultiHeadSelfAttention& a, int64_t tokens) {
  const int64_t NH = a.num_heads, HD = a.head_dim, A = NH * HD;
  const std::string qkv = g.linear(scope + ".qkv", h, *a.qkv);  // (B, N, 3A)
  // (B, N, 3, NH, HD) -> (3, B, NH, N, HD)
  const std::string split = g.node(scope, "Reshape", {qkv, g.ints({0, tokens, 3, NH, HD})});
  const std::string heads = g.node(scope, "Transpose", {split}, {B::attr("perm", {2, 0, 3, 1, 4})});
  std::string q = g.node(scope, "Gather", {heads, g.index(0)}, {B::attr("axis", int64_t{0})});  // (B, NH, N, HD)
  std::string k = g.node(scope, "Gather", {heads, g.index(1)}, {B::attr("axis", int64_t{0})});
  const std::string v = g.node(scope, "Gather", {heads, g.index(2)}, {B::attr("axis", int64_t{0})});
  if (a.q_norm) {
    q = g.layer_norm(scope + ".q_norm", q, *a.q_norm);
    k = g.layer_norm(scope + ".k_norm", k, *a.k_norm);
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)));
  q = g.node(scope, "Mul", {q, g.scalar(scale)});
  const std::string kt = g.node(scope, "Transpose", {k}, {B::attr("perm", {0, 1, 3, 2})});  // (B, NH, HD, N)
  const std::string scores = g.node(scope, "MatMul", {q, kt});                              // (B, NH, N, N)
  const std::string probs = g.node(scope, "Softmax", {scores}, {B::attr("axis", int64_t{-1})});
  const std::string out = g.node(scope, "MatMul", {probs, v});                                    // (B, NH, N, HD)
  const std::string merged = g.node(scope, "Transpose", {out}, {B::attr("perm", {0, 2, 1, 3})});  // (B, N, NH, HD)
  const std::string rows = g.node(scope, "Reshape", {merged, g.ints({0, tokens, A})});            // (B, N, A)
  return g.linear(scope + ".proj", rows, *a.proj);
}

std::string encoder_block(GraphBuilder& g, const std::string& scope, std::string x, const nn::EncoderBlock& b,
                          int64_t tokens) {
  const int norm_axes = b.config.norm_shape.size() == 2 ? 2 : 1;  // the notebook's (N, D) norms
  const std::string h1 = g.layer_norm(scope + ".norm1", x, *b.norm1, norm_axes);
  x = residual(g, scope + ".ls1", x, attention(g, scope + ".attn", h1, *b.attn, tokens), b.ls1);
  const std::string h2 = g.layer_norm(scope + ".norm2", x, *b.norm2, norm_axes);
  const nn::Mlp& mlp = *b.mlp;
  std::string y = g.linear(scope + ".mlp.fc1", h2, *mlp.fc1);
  if (mlp.fc2) {
    switch (mlp.activation) {
      case nn::ActivationKind::Gelu:
        y = g.gelu(scope + ".mlp.act", y);
        break;
      case nn::ActivationKind::GeluTanh:
        y = g.gelu_tanh(scope + ".mlp.act", y);
        break;
      case nn::ActivationKind::QuickGelu:
        y = g.quick_gelu(scope + ".mlp.act", y);
        break;
      case nn::ActivationKind::Relu:
        y = g.node(scope + ".mlp.act", "Relu", {y});
        break;
    }
    y = g.linear(scope + ".mlp.fc2", y, *mlp.fc2);
  }
  return residual(g, scope + ".ls2", x, y, b.ls2);
}

// The prefix tokens [cls] [dist] [reg x R] as one (1, R, D) table, expanded to the batch.
std::string prefix_tokens(GraphBuilder& g, const model::VisionTransformer& m, const std::string& input) {
  std::vector<Tensor> rows;
  if (m.cls_token.defined()) rows.push_back(m.cls_token.data().contiguous().view({1, m.config().dim}));
  if (m.dist_token.defined()) rows.push_back(m.dist_token.data().contiguous().view({1, m.config().dim}));
  if (m.reg_token.defined()) rows.push_back(m.reg_token.data().contiguous().view({-1, m.config().dim}));
  int64_t count = 0;
  for (const Tensor& r : rows) count += r.size(0);
  const int64_t D = m.config().dim;
  Tensor table = Tensor::empty({1, count, D});
  int64_t at = 0;
  for (const Tensor& r : rows) {
    std::copy(r.data<float>(), r.data<float>() + r.numel(), table.data<float>() + at * D);
    at += r.size(0);
  }
  const std::string batch = g.node("prefix", "Gather", {g.node("prefix", "Shape", {input}), g.ints({0})},
                                   {B::attr("axis", int64_t{0})});  // (1): B
  const std::string shape = g.node("prefix", "Concat", {batch, g.ints({count, D})}, {B::attr("axis", int64_t{0})});
  return g.node("prefix", "Expand", {g.initializer("prefix_tokens", table), shape});  // (B, R, D)
}

}  // namespace

Outputs vit_graph(GraphBuilder& g, const model::VisionTransformer& m, const std::string& input) {
  const model::ViTConfig& c = m.config();
  const int64_t D = c.dim, N = c.num_tokens(), prefix = c.prefix_tokens();
  const std::string map = stem_and_backbone(g, m, input);
  // patch embedding: Conv (B, D, g, g) -> (B, D, P) -> (B, P, D)
  const std::string grid = conv(g, "patch_embed.proj", map, *m.patch_embed->proj);
  const std::string flat = g.node("patch_embed", "Reshape", {grid, g.ints({0, D, c.num_patches()})});
  std::string x = g.node("patch_embed", "Transpose", {flat}, {B::attr("perm", {0, 2, 1})});
  const std::string pos = g.initializer("pos_embed", m.pos_embed.data());
  if (c.no_embed_class) x = g.node("pos_embed", "Add", {x, pos});
  if (prefix > 0) x = g.node("prefix", "Concat", {prefix_tokens(g, m, input), x}, {B::attr("axis", int64_t{1})});
  if (!c.no_embed_class) x = g.node("pos_embed", "Add", {x, pos});
  if (m.norm_pre) x = g.layer_norm("norm_pre", x, *m.norm_pre);
  int64_t i = 0;
  for (const auto& [_, block] : m.blocks->named_children()) {
    x = encoder_block(g, "blocks." + std::to_string(i++), x, dynamic_cast<const nn::EncoderBlock&>(*block), N);
  }
  // pooling, as pool_features: class rows (then norm, fc_norm), or the patch mean (each patch
  // through norm, then fc_norm)
  Outputs out;
  std::string features, dist_row;
  const auto norms = [&](std::string v) {
    if (m.norm) v = g.layer_norm("norm", v, *m.norm);
    if (m.fc_norm) v = g.layer_norm("fc_norm", v, *m.fc_norm);
    return v;
  };
  if (c.pool_kind() == model::PoolKind::Cls) {
    features = norms(g.node("pool", "Gather", {x, g.index(0)}, {B::attr("axis", int64_t{1})}));  // (B, D)
    if (c.dist_token) {
      dist_row = norms(g.node("pool", "Gather", {x, g.index(1)}, {B::attr("axis", int64_t{1})}));
      const std::string both = g.node("pool", "Add", {features, dist_row});
      out.embedding = g.node("pool", "Mul", {both, g.scalar(0.5f)});
    } else {
      out.embedding = features;
    }
  } else {
    std::string patches = g.node("pool", "Slice", {x, g.ints({prefix}), g.ints({N}), g.ints({1})});  // (B, P, D)
    if (m.norm) patches = g.layer_norm("norm", patches, *m.norm);
    std::string mean = g.node("pool", "ReduceMean", {patches},
                              {B::attr("axes", std::vector<int64_t>{1}), B::attr("keepdims", int64_t{0})});
    if (m.fc_norm) mean = g.layer_norm("fc_norm", mean, *m.fc_norm);
    features = out.embedding = mean;
  }
  if (m.pre_logits) {
    out.embedding = g.node("pre_logits", "Tanh", {g.linear("pre_logits.fc", out.embedding, *m.pre_logits->fc)});
  }
  if (!m.head) return out;
  VIT_CHECK(!(c.dist_token && m.pre_logits), "export", "{}: a distilled model with a pre-logits layer is not exported",
            c.name);
  if (c.dist_token && c.pool_kind() == model::PoolKind::Cls && m.head_dist && !m.pre_logits) {
    // DeiT's logits: (head(x_cls) + head_dist(x_dist)) / 2
    const std::string a = g.linear("head", features, *m.head), b = g.linear("head_dist", dist_row, *m.head_dist);
    out.logits = g.node("head", "Mul", {g.node("head", "Add", {a, b}), g.scalar(0.5f)});
  } else {
    out.logits = g.linear("head", out.embedding, *m.head);
  }
  if (c.head_tanh) out.logits = g.node("head", "Tanh", {out.logits});
  if (c.projection) {  // CLIP: the head is the image projection, its output the embedding
    out.embedding = out.logits;
    out.logits.clear();
  }
  return out;
}

}  // namespace vit::infer::onnx_export
