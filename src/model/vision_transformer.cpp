// VisionTransformer (see vision_transformer.h).
#include "model/vision_transformer.h"

#include "core/system.h"
#include "nn/init.h"

namespace vit::model {

PreLogits::PreLogits(int64_t in_features, int64_t out_features, Generator& gen) {
  fc = register_module("fc", std::make_shared<nn::Linear>(in_features, out_features, true, gen));
}

VisionTransformer::VisionTransformer(const ViTConfig& config, nn::GeneratorPtr gen)
    : config_(config), gen_(std::move(gen)) {
  config_.validate();
  VIT_CHECK(gen_ != nullptr, "vit", "a Generator is required");
  const ViTConfig& c = config_;
  check_fits_in_memory(4 * parameter_count(c), fmt::format("the float32 weights of {}", c.name), "");
  Generator& g = *gen_;
  auto token = [&](const char* name, int64_t count, double std, bool truncated) {
    Tensor t = Tensor::empty({1, count, c.dim});
    truncated ? nn::init::trunc_normal_(t, std, g) : nn::init::normal_(t, 0.0, std, g);
    return register_parameter(name, t);
  };
  if (c.class_token()) cls_token = token("cls_token", 1, 1e-6, false);
  if (c.dist_token) dist_token = token("dist_token", 1, 0.02, true);
  if (c.reg_tokens > 0) reg_token = token("reg_token", c.reg_tokens, 1e-6, false);
  pos_embed = token("pos_embed", c.pos_tokens(), 0.02, true);
  if (c.stem_layers > 0) {
    // PyTorch's Conv2d initialisation (the Linear re-initialisation below does not touch it).
    stem = register_module("stem", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.stem_layers; ++i) {
      stem->push_back(
          std::make_shared<nn::Conv2d>(i == 0 ? c.in_channels : c.stem_channels, c.stem_channels, 3, 1, 1, true, g));
      stem->push_back(std::make_shared<nn::GELU>());
    }
  }
  if (c.hybrid()) backbone = register_module("backbone", std::make_shared<ConvBackbone>(c, g));
  patch_embed = register_module(
      "patch_embed", std::make_shared<nn::PatchEmbed>(c.feature_size(), c.embed_patch(), c.embed_channels(), c.dim, g,
                                                      /*bias=*/!c.pre_norm));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(c.dropout, gen_));
  if (c.pre_norm) norm_pre = register_module("norm_pre", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < c.depth; ++i) {
    nn::EncoderBlockConfig bc;
    bc.dim = c.dim;
    bc.num_heads = c.num_heads;
    bc.head_dim = c.head_dim();
    bc.mlp_ratio = static_cast<double>(c.hidden_dim()) / static_cast<double>(c.dim);
    bc.qkv_bias = c.qkv_bias;
    bc.qk_norm = c.qk_norm;
    bc.act = c.act;
    bc.layer_scale = c.layer_scale;
    bc.mlp_layers = c.mlp_layers;
    if (c.norm_tokens) bc.norm_shape = {c.num_tokens(), c.dim};
    bc.dropout = c.dropout;
    bc.attn_dropout = c.attn_dropout;
    bc.drop_path = c.depth > 1 ? c.drop_path * static_cast<double>(i) / static_cast<double>(c.depth - 1) : 0.0;
    bc.eps = c.eps;
    auto block = std::make_shared<nn::EncoderBlock>(bc, gen_);
    VIT_ASSERT(c.mlp_layers == 1 || block->mlp->fc1->out_features == c.hidden_dim());
    blocks->push_back(block);
  }
  if (c.final_norm) {
    const bool cls = c.pool_kind() == PoolKind::Cls;
    auto& final_norm = cls ? norm : fc_norm;
    final_norm = register_module(cls ? "norm" : "fc_norm", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  }
  int64_t features = c.dim;
  if (c.representation_size > 0) {
    pre_logits = register_module("pre_logits", std::make_shared<PreLogits>(c.dim, c.representation_size, g));
    features = c.representation_size;
  }
  if (c.has_head())
    head = register_module("head", std::make_shared<nn::Linear>(features, c.num_classes, c.head_bias, g));
  if (c.dist_token)
    head_dist = register_module("head_dist", std::make_shared<nn::Linear>(c.dim, c.num_classes, true, g));
  // timm's init_weights_vit_timm: every Linear gets trunc-normal(.02) weights and zero biases.
  apply([&g](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      Tensor w = lin->weight.data();
      nn::init::trunc_normal_(w, 0.02, g);
      if (lin->bias.defined() && !nn::init::SkipInit::active()) lin->bias.data().fill_(0.0);
    }
  });
}

Variable VisionTransformer::forward_tokens(const Variable& images) {
  const ViTConfig& c = config_;
  VIT_CHECK(images.dim() == 4 && images.size(1) == c.in_channels && images.size(2) == c.image_size &&
                images.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(images.shape()), c.in_channels, c.image_size,
            c.image_size);
  const int64_t B = images.size(0);
  Variable x;
  if (backbone) {  // its channels-last map, in patches of embed_patch() (1: the map's rows) -> (B, P, D)
    const nn::Conv2d& proj = *patch_embed->proj;
    x = conv2d_channels_last(backbone->forward(images), proj.weight, proj.bias, proj.stride, 0, proj.precision)
            .reshape({B, c.num_patches(), c.dim});
  } else {
    x = patch_embed->forward(stem ? stem->forward(images) : images);  // (B, P, D)
  }
  // The tokens in front: [cls] [dist] [reg x R]; the position table covers them too unless
  // no_embed_class (timm's _pos_embed).
  std::vector<Variable> tokens;
  if (cls_token.defined()) tokens.push_back(cls_token.expand({B, 1, c.dim}));
  if (dist_token.defined()) tokens.push_back(dist_token.expand({B, 1, c.dim}));
  if (reg_token.defined()) tokens.push_back(reg_token.expand({B, c.reg_tokens, c.dim}));
  if (c.no_embed_class) x = x + pos_embed;  // (B, P, D)
  if (!tokens.empty()) {
    tokens.push_back(x);
    x = cat(tokens, 1);  // (B, N, D)
  }
  if (!c.no_embed_class) x = x + pos_embed;  // (B, N, D)
  x = pos_drop->forward(x);
  if (norm_pre) x = norm_pre->forward(x);
  x = blocks->forward(x);              // (B, N, D)
  return norm ? norm->forward(x) : x;  // (B, N, D)
}

Variable VisionTransformer::pool_tokens(const Variable& tokens, PoolKind pool) const {
  const ViTConfig& c = config_;
  if (pool == PoolKind::Cls) {
    VIT_CHECK(c.class_token(), "vit", "pool 'cls': this model has no class token (pool it with avg)");
    const Variable first = tokens.select(1, 0);  // (B, D)
    if (dist_token.defined()) return (first + tokens.select(1, 1)) * 0.5;
    // An fc_norm model (avg-pooled, timm's use_fc_norm) asked for its class token: through fc_norm,
    // as timm's forward_head(pre_logits=True) pools then normalises.
    return fc_norm ? fc_norm->forward(first) : first;
  }
  // Avg and Mean alike: the patch tokens' mean (Mean's model has no class token to leave out).
  const Variable mean_patches = tokens.slice(1, c.prefix_tokens(), tokens.size(1)).mean({1});  // (B, D)
  return fc_norm ? fc_norm->forward(mean_patches) : mean_patches;
}

Variable VisionTransformer::forward_features(const Variable& images) {
  Variable pooled = pool_tokens(forward_tokens(images), config_.pool_kind());  // (B, D)
  if (pre_logits) pooled = pre_logits->forward(pooled);                        // (B, R)
  return pooled;
}

std::pair<Variable, Variable> VisionTransformer::forward_distilled(const Variable& images) {
  VIT_CHECK(head_dist != nullptr, "vit", "{} has no distillation token and head", config_.name);
  const Variable x = forward_tokens(images);                                   // (B, N, D)
  return {head->forward(x.select(1, 0)), head_dist->forward(x.select(1, 1))};  // (B, K) each
}

Variable VisionTransformer::forward(const Variable& images) {
  VIT_CHECK(head != nullptr, "vit",
            "{} has no classification head (num_classes 0: a feature extractor); use its features (vit embed)",
            config_.name);
  if (head_dist) {
    auto [cls, dist] = forward_distilled(images);
    return (cls + dist) * 0.5;  // (B, K)
  }
  Variable logits = head->forward(forward_features(images));  // (B, K)
  return config_.head_tanh ? tanh(logits) : logits;
}

}  // namespace vit::model
