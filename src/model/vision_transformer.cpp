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
  const bool use_cls = c.pool == "cls";
  if (use_cls) {
    Tensor t = Tensor::empty({1, 1, c.dim});
    nn::init::normal_(t, 0.0, 1e-6, g);
    cls_token = register_parameter("cls_token", t);
  }
  Tensor pos = Tensor::empty({1, c.num_tokens(), c.dim});
  nn::init::trunc_normal_(pos, 0.02, g);
  pos_embed = register_parameter("pos_embed", pos);
  if (c.stem_layers > 0) {
    // PyTorch's Conv2d initialisation (the Linear re-initialisation below does not touch it).
    stem = register_module("stem", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.stem_layers; ++i) {
      stem->push_back(
          std::make_shared<nn::Conv2d>(i == 0 ? c.in_channels : c.stem_channels, c.stem_channels, 3, 1, 1, true, g));
      stem->push_back(std::make_shared<nn::GELU>());
    }
  }
  patch_embed = register_module(
      "patch_embed", std::make_shared<nn::PatchEmbed>(c.image_size, c.patch_size, c.embed_channels(), c.dim, g));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(c.dropout, gen_));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < c.depth; ++i) {
    nn::EncoderBlockConfig bc;
    bc.dim = c.dim;
    bc.num_heads = c.num_heads;
    bc.mlp_ratio = static_cast<double>(c.hidden_dim()) / static_cast<double>(c.dim);
    bc.qkv_bias = c.qkv_bias;
    bc.dropout = c.dropout;
    bc.attn_dropout = c.attn_dropout;
    bc.drop_path = c.depth > 1 ? c.drop_path * static_cast<double>(i) / static_cast<double>(c.depth - 1) : 0.0;
    bc.eps = c.eps;
    auto block = std::make_shared<nn::EncoderBlock>(bc, gen_);
    VIT_ASSERT(block->mlp->fc1->out_features == c.hidden_dim());
    blocks->push_back(block);
  }
  if (use_cls) {
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  } else {
    fc_norm = register_module("fc_norm", std::make_shared<nn::LayerNorm>(Shape{c.dim}, c.eps));
  }
  int64_t features = c.dim;
  if (c.representation_size > 0) {
    pre_logits = register_module("pre_logits", std::make_shared<PreLogits>(c.dim, c.representation_size, g));
    features = c.representation_size;
  }
  head = register_module("head", std::make_shared<nn::Linear>(features, c.num_classes, true, g));
  // timm's init_weights_vit_timm: every Linear gets trunc-normal(.02) weights and zero biases.
  apply([&g](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      Tensor w = lin->weight.data();
      nn::init::trunc_normal_(w, 0.02, g);
      if (lin->bias.defined() && !nn::init::SkipInit::active()) lin->bias.data().fill_(0.0);
    }
  });
}

Variable VisionTransformer::forward_features(const Variable& images) {
  const ViTConfig& c = config_;
  VIT_CHECK(images.dim() == 4 && images.size(1) == c.in_channels && images.size(2) == c.image_size &&
                images.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(images.shape()), c.in_channels, c.image_size,
            c.image_size);
  const int64_t B = images.size(0);
  Variable x = patch_embed->forward(stem ? stem->forward(images) : images);   // (B, P, D)
  if (cls_token.defined()) x = cat({cls_token.expand({B, 1, c.dim}), x}, 1);  // (B, N, D)
  x = pos_drop->forward(x + pos_embed);                                       // (B, N, D)
  x = blocks->forward(x);                                                     // (B, N, D)
  Variable pooled = norm ? norm->forward(x).select(1, 0)                      // (B, D)
                         : fc_norm->forward(x.mean({1}));                     // (B, D)
  if (pre_logits) pooled = pre_logits->forward(pooled);                       // (B, R)
  return pooled;
}

Variable VisionTransformer::forward(const Variable& images) { return head->forward(forward_features(images)); }

}  // namespace vit::model
