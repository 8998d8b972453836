// VisionTransformer, as timm's vision_transformer.py (and deit.py) builds it, same parameter names:
//   x (B, C, H, W) -> [stem: (Conv2d 3x3 + GELU) x stem_layers, (B, S, H, W)]
//   [or a hybrid's backbone: ResNet stages with BatchNorm (model/backbone.h), (B, S, H/s, W/s)]
//   -> patch_embed (B, P, D) -> prefix tokens [cls, dist, reg x R] and pos_embed (B, N, D): the
//   position table covers the patches and the class/distillation tokens, or (no_embed_class) the
//   patches only, added before the prefix is put in front -> pos_drop -> [norm_pre (CLIP)]
//   -> blocks.0 .. blocks.{depth-1} (pre-norm EncoderBlock, [LayerScale], drop_path rising
//   linearly to the configured rate) -> norm -> pool: the class token's row (DeiT: the mean of the
//   class and distillation rows) or fc_norm(mean of the patch tokens)
//   -> [pre_logits.fc + Tanh] -> head (B, K) [DeiT: (head(x_cls) + head_dist(x_dist)) / 2]
//   [the ViT notebook: tanh(head(x))] [CLIP: head is the image projection]
// Its parameters (names, shapes, order) are the ones model/architecture.h describes without
// building it; tests hold the two equal for every variant of the config.
#pragma once

#include <string>
#include <vector>

#include "model/architecture.h"  // parameter_specs, parameter counts, MACs, memory estimate
#include "model/backbone.h"
#include "model/vit_config.h"
#include "nn/transformer.h"

namespace vit::model {

// timm's representation layer: pre_logits.fc (Linear) then Tanh.
class PreLogits : public nn::Module {
 public:
  PreLogits(int64_t in_features, int64_t out_features, Generator& gen);
  Variable forward(const Variable& x) override { return tanh(fc->forward(x)); }
  std::shared_ptr<nn::Linear> fc;
};

class VisionTransformer : public nn::Module {
 public:
  // Builds and initialises (timm: trunc-normal std .02 Linear weights, zero biases, LayerNorm
  // ones/zeros, pos_embed trunc-normal .02, cls_token normal std 1e-6). gen also drives dropout.
  VisionTransformer(const ViTConfig& config, nn::GeneratorPtr gen);
  // (B, C, H, W) -> logits (B, K) (a distilled model: the mean of its two heads; a projection
  // model: the embedding). A model without a head (num_classes 0) refuses.
  Variable forward(const Variable& images) override;
  // The token sequence after the blocks and the final norm (B, N, D) (for an avg-pooled model,
  // whose fc_norm applies after pooling, the blocks' output).
  Variable forward_tokens(const Variable& images);
  // Pooling of forward_tokens' output: "cls" (the class row; distilled: mean of class and
  // distillation rows), "avg" (the mean of the patch tokens, then fc_norm if the model has one).
  Variable pool_tokens(const Variable& tokens, PoolKind pool) const;
  // Pooled features before the head (B, D) (or (B, representation_size)).
  Variable forward_features(const Variable& images);
  // A distilled model in training (DeiT): the class head's and the distillation head's logits.
  std::pair<Variable, Variable> forward_distilled(const Variable& images);

  const ViTConfig& config() const { return config_; }
  const nn::GeneratorPtr& generator() const { return gen_; }

  Variable cls_token, dist_token, reg_token, pos_embed;  // undefined where the config has none
  std::shared_ptr<nn::Sequential> stem;                  // only with stem_layers > 0: Conv2d, GELU, ...
  std::shared_ptr<ConvBackbone> backbone;                // only a hybrid's (conv_stages > 0)
  std::shared_ptr<nn::PatchEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  std::shared_ptr<nn::LayerNorm> norm_pre;  // CLIP (pre_norm)
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> norm, fc_norm;  // norm for CLS pooling, fc_norm for mean pooling
  std::shared_ptr<PreLogits> pre_logits;         // only with representation_size > 0
  std::shared_ptr<nn::Linear> head, head_dist;   // head null without classes, head_dist only distilled

 private:
  ViTConfig config_;
  nn::GeneratorPtr gen_;
};

}  // namespace vit::model
