// Checkpoint key layouts of the three ViT families people have weights for, converted to ours
// (timm's names). Detection looks at the keys; the model config is inferred from tensor shapes
// where a file carries no config (what shapes cannot tell -- the number of heads -- comes from
// the caller, defaulting to the standard value for the standard widths).
//   timm:        cls_token, pos_embed, patch_embed.proj.*, blocks.{i}.attn.qkv.*, norm.*, head.*
//   torchvision: class_token, encoder.pos_embedding, conv_proj.*,
//                encoder.layers.encoder_layer_{i}.{ln_1, self_attention.in_proj_*, ...},
//                mlp.0/mlp.3 (or mlp.linear_1/linear_2), encoder.ln.*, heads.head.*
//   huggingface: [vit.]embeddings.{cls_token, position_embeddings, patch_embeddings.projection.*},
//                [vit.]encoder.layer.{i}.attention.attention.{query,key,value}.* (split q/k/v),
//                layernorm_before/after, intermediate.dense, output.dense, [vit.]layernorm, classifier
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/vit_config.h"

namespace vit::model {

enum class Layout { Timm, Torchvision, HuggingFace };

const char* layout_name(Layout layout);
Layout parse_layout(const std::string& name);  // "timm", "torchvision", "huggingface" (or "hf")

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Which layout these keys are in; throws "[checkpoint] ..." if none fits.
Layout detect_layout(const NamedTensors& tensors, const std::string& source);

struct Converted {
  NamedTensors weights;             // timm names
  std::vector<std::string> unused;  // keys of the source that map to nothing
};
// Renames (and for Hugging Face concatenates q/k/v into qkv) into timm's names.
Converted to_timm(const NamedTensors& tensors, Layout layout, const std::string& source);

// One tensor's key in each layout: nullptr where a layout has no such tensor, or (Hugging Face's
// attn.qkv.*) stores it split into attention.attention.{query,key,value}, concatenated by to_timm.
struct KeyNames {
  const char* timm;
  const char* torchvision;
  const char* huggingface;
};
// The tensors outside the encoder blocks (full keys, Hugging Face's without the optional "vit."),
// and one block's (relative to blocks.{i}. / encoder.layers.encoder_layer_{i}. /
// [vit.]encoder.layer.{i}.), in module order; the timm column is held equal to
// architecture_spec()'s names by the tests. (torchvision's older mlp.linear_1 / linear_2 keys are
// accepted besides mlp.0 / mlp.3.)
const std::vector<KeyNames>& top_level_keys();
const std::vector<KeyNames>& block_keys();

// Infers a config from timm-named weights. num_heads <= 0 picks the standard value for the
// width (192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16) and refuses any other width, whose head
// count the shapes cannot tell (pass --heads); eps follows the layout.
ViTConfig infer_config(const NamedTensors& timm_weights, Layout layout, int64_t num_heads, const std::string& source);

// Position embedding (1, prefix + gh*gw, D) resampled to a new grid by bicubic interpolation,
// keeping the prefix (CLS) token: timm's resample_abs_pos_embed (align_corners false) or
// torchvision's interpolate_embeddings (align_corners true).
Tensor resample_pos_embed(const Tensor& pos_embed, int64_t prefix_tokens, int64_t new_grid_h, int64_t new_grid_w,
                          bool align_corners);

int64_t default_num_heads(int64_t dim);  // 0 for a width that is not a standard one
double default_eps(Layout layout);

}  // namespace vit::model
