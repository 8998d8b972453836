// VisionTransformer, as timm's vision_transformer.py builds it (same parameter names):
//   x (B, C, H, W) -> patch_embed (B, P, D) -> [cls_token; x] + pos_embed (B, N, D) -> pos_drop
//   -> blocks.0 .. blocks.{depth-1} (pre-norm EncoderBlock, drop_path rising linearly to the
//   configured rate) -> norm -> pool (CLS token, or mean of patch tokens + fc_norm)
//   -> [pre_logits.fc + Tanh] -> head (B, K)
#pragma once

#include <string>
#include <vector>

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

  Variable cls_token, pos_embed;  // cls_token undefined for mean pooling
  std::shared_ptr<nn::PatchEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> norm, fc_norm;  // norm for CLS pooling, fc_norm for mean pooling
  std::shared_ptr<PreLogits> pre_logits;  // only with representation_size > 0
  std::shared_ptr<nn::Linear> head;

 private:
  ViTConfig config_;
  nn::GeneratorPtr gen_;
};

// Multiply-accumulates of one forward pass per image (FLOPs = 2 x MACs), by part.
struct ComputeCost {
  int64_t patch_embed = 0, attention = 0, mlp = 0, head = 0;
  int64_t total() const { return patch_embed + attention + mlp + head; }
};
ComputeCost macs_per_image(const ViTConfig& config);

// Parameters of a config, computed without building the model (equals num_parameters()).
double parameter_count(const ViTConfig& config);

// Peak memory of a forward pass (inference) or a training step for `batch` images, in bytes
// (float32): the weights; for training also gradients, AdamW's two moments and an EMA copy,
// plus the activations autograd keeps for the backward pass; for inference about one block's
// working set. An estimate for refusing what cannot fit, not an exact figure.
struct MemoryEstimate {
  double weights = 0, training_state = 0, activations = 0;
  double total() const { return weights + training_state + activations; }
  std::string describe() const;  // "weights 330.2 MiB, ..., activations for the batch 2.1 GiB"
};
MemoryEstimate memory_estimate(const ViTConfig& config, int64_t batch, bool training);
// Refuses (a "[memory] ..." error) a model/batch whose estimate exceeds the machine's memory.
void check_memory(const ViTConfig& config, int64_t batch, bool training);

// Parameter count per top-level part (patch_embed, cls_token, pos_embed, blocks, norm, head, ...).
std::vector<std::pair<std::string, int64_t>> parameters_by_part(const VisionTransformer& model);

}  // namespace vit::model
