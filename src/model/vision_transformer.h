// VisionTransformer, as timm's vision_transformer.py builds it (same parameter names):
//   x (B, C, H, W) -> [stem: (Conv2d 3x3 + GELU) x stem_layers, (B, S, H, W)]
//   -> patch_embed (B, P, D) -> [cls_token; x] + pos_embed (B, N, D) -> pos_drop
//   -> blocks.0 .. blocks.{depth-1} (pre-norm EncoderBlock, drop_path rising linearly to the
//   configured rate) -> norm -> pool (CLS token, or mean of patch tokens + fc_norm)
//   -> [pre_logits.fc + Tanh] -> head (B, K)
// Its parameters (names, shapes, order) are the ones model/architecture.h describes without
// building it; tests hold the two equal for every variant of the config.
#pragma once

#include <string>
#include <vector>

#include "model/architecture.h"  // parameter_specs, parameter counts, MACs, memory estimate
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
  Variable forward(const Variable& images) override;  // (B, C, H, W) -> logits (B, K)
  // Pooled features before the head (B, D) (or (B, representation_size)).
  Variable forward_features(const Variable& images);

  const ViTConfig& config() const { return config_; }
  const nn::GeneratorPtr& generator() const { return gen_; }

  Variable cls_token, pos_embed;         // cls_token undefined for mean pooling
  std::shared_ptr<nn::Sequential> stem;  // only with stem_layers > 0: Conv2d, GELU, Conv2d, GELU, ...
  std::shared_ptr<nn::PatchEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> norm, fc_norm;  // norm for CLS pooling, fc_norm for mean pooling
  std::shared_ptr<PreLogits> pre_logits;         // only with representation_size > 0
  std::shared_ptr<nn::Linear> head;

 private:
  ViTConfig config_;
  nn::GeneratorPtr gen_;
};

}  // namespace vit::model
