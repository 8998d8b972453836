// The architecture of a ViTConfig described once, without building the model: every parameter's
// timm name and shape in module order, as the encoder blocks repeat it (one block's table, depth
// times). What is derived from it reads that table: parameter counts (total and per part),
// multiply-accumulates per image (each weight's matmul, plus the attention matmuls) and the
// memory estimate used to refuse what cannot fit. A test holds the table equal to the built
// VisionTransformer's named_parameters() for every variant of the config.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/shape.h"
#include "model/vit_config.h"

namespace vit::model {

struct ParameterSpec {
  std::string name;  // timm's dotted name (in ArchitectureSpec::block: relative to "blocks.{i}.")
  Shape shape;
  // > 0: a weight applied as one matmul to this many vectors per image, `rows` x numel
  // multiply-accumulates (a Linear's (out, in) weight on every token; the patch embedding's
  // (D, C, P, P) convolution on every patch; a stem convolution's (C', C, 3, 3) on every pixel).
  int64_t rows = 0;
};

struct ArchitectureSpec {
  std::vector<ParameterSpec> before_blocks;  // cls_token (cls pooling), pos_embed, [stem.*], patch_embed.proj.*
  std::vector<ParameterSpec> block;          // one EncoderBlock: norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2
  int64_t depth = 0;                         // blocks.0 .. blocks.{depth-1}
  std::vector<ParameterSpec> after_blocks;   // norm (cls) or fc_norm (mean), [pre_logits.fc], head
};
// The config is not validated here (callers do; an invalid config has no sensible shapes).
ArchitectureSpec architecture_spec(const ViTConfig& config);

// Every parameter with its full name, in module (registration) order: what
// VisionTransformer(config).named_parameters() holds.
std::vector<ParameterSpec> parameter_specs(const ViTConfig& config);

// Every buffer (a hybrid's BatchNorm running_mean / running_var, each after its layer's weight
// and bias in the state dict): what VisionTransformer(config).named_buffers() holds.
std::vector<ParameterSpec> buffer_specs(const ViTConfig& config);
// Values of the state dict (parameters and buffers): what a checkpoint of the config holds.
double state_count(const ViTConfig& config);

// Parameters of a config, computed without building the model (equals num_parameters()). A
// double: absurd configs must give a huge number to refuse, not an int64 overflow.
double parameter_count(const ViTConfig& config);

// Parameter count per top-level part (cls_token, pos_embed, patch_embed, blocks, norm or fc_norm,
// pre_logits, head), in module order; "blocks" only with depth > 0.
std::vector<std::pair<std::string, int64_t>> parameters_by_part(const ViTConfig& config);
// Parameters of one encoder block.
int64_t parameters_per_block(const ViTConfig& config);

// Multiply-accumulates of one forward pass per image (FLOPs = 2 x MACs), by part.
struct ComputeCost {
  int64_t stem = 0, patch_embed = 0, attention = 0, mlp = 0, head = 0;
  int64_t total() const { return stem + patch_embed + attention + mlp + head; }
};
ComputeCost macs_per_image(const ViTConfig& config);

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

}  // namespace vit::model
