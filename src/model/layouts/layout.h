// The key layouts of foreign ViT weights (timm, torchvision, Hugging Face, JAX), converted to ours
// (timm's names): the layout detected from the keys, to_timm (one converter per source, the other
// files of layouts/), and the key tables. What the converted tensors' shapes tell of the model is
// config_from_shapes.h.
//   timm:        cls_token, pos_embed, patch_embed.proj.*, blocks.{i}.attn.qkv.*, norm.*, head.*
//   torchvision: class_token, encoder.pos_embedding, conv_proj.*,
//                encoder.layers.encoder_layer_{i}.{ln_1, self_attention.in_proj_*, ...},
//                mlp.0/mlp.3 (or mlp.linear_1/linear_2), encoder.ln.*, heads.head.*
//   huggingface: [vit.]embeddings.{cls_token, position_embeddings, patch_embeddings.projection.*},
//                [vit.]encoder.layer.{i}.attention.attention.{query,key,value}.* (split q/k/v),
//                layernorm_before/after, intermediate.dense, output.dense, [vit.]layernorm, classifier
//                and the descendants' models:
//                DeiT (DeiTForImageClassificationWithTeacher): deit. prefix, embeddings.distillation_token,
//                  cls_classifier, distillation_classifier;
//                DINOv2 (Dinov2Model, Dinov2WithRegistersModel): embeddings.{mask_token (ignored),
//                  register_tokens}, blocks' norm1/norm2, layer_scale{1,2}.lambda1, mlp.fc1/fc2;
//                CLIP (CLIPVisionModel[WithProjection]): vision_model.embeddings.{class_embedding (D),
//                  patch_embedding (no bias), position_embedding.weight (N, D), position_ids (ignored)},
//                  pre_layrnorm, encoder.layers.{i}.{layer_norm1/2, self_attn.{q,k,v,out}_proj,
//                  mlp.fc1/fc2}, post_layernorm, visual_projection (the projection head, no bias)
//   jax:         the original ViT / AugReg / big_vision .npz names: [prefix]embedding/kernel (HWIO),
//                cls, Transformer/posembed_input/pos_embedding, Transformer/encoderblock_{i}/
//                {LayerNorm_0, MultiHeadDotProductAttention_1/{query,key,value,out}, LayerNorm_2,
//                MlpBlock_3/Dense_{0,1}}, Transformer/encoder_norm, pre_logits, head (layouts/jax.cpp)
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace vit::model {

enum class Layout { Timm, Torchvision, HuggingFace, Jax };

const char* layout_name(Layout layout);
Layout parse_layout(const std::string& name);  // "timm", "torchvision", "huggingface" (or "hf"), "jax"

// Which model family a file's keys say it is, named once: the name is what info, serve and the
// checkpoint's "source_family" metadata carry; the loaders compare the enum.
enum class Family { Vit, Deit, Dinov2, Clip };
struct FamilyName {
  Family family;
  const char* name;
};
inline constexpr FamilyName kFamilyNames[] = {
    {Family::Vit, "vit"}, {Family::Deit, "deit"}, {Family::Dinov2, "dinov2"}, {Family::Clip, "clip"}};
const char* family_name(Family family);
// Throws "[op] SOURCE: family 'x' is not one of vit, deit, dinov2, clip".
Family parse_family(const std::string& name, const std::string& source, const char* op = "checkpoint");

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Which layout these keys are in; throws "[checkpoint] ..." if none fits, or if the file mixes
// two (naming a key of each).
Layout detect_layout(const NamedTensors& tensors, const std::string& source);

// Keys a layout has that inference does not use (DINOv2's mask_token, CLIP's position_ids
// buffer): listed, never an error.
bool is_ignored_key(const std::string& key, Layout layout);

struct Converted {
  NamedTensors weights;              // timm names
  std::vector<std::string> unused;   // keys of the source that map to nothing
  std::vector<std::string> ignored;  // keys known to be unused for inference (is_ignored_key)
  // The file's key (Hugging Face q/k/v: the three joined by " + ") of every renamed weight, so
  // errors can name what the user's file calls it. Empty for the timm layout.
  std::map<std::string, std::string> source_keys;
  // What the key names tell beyond shapes: the family ("vit", "deit", "dinov2", "clip") with its
  // LayerNorm eps and MLP activation, and whether the head is CLIP's image projection.
  Family family = Family::Vit;
  double eps = 1e-6;
  std::string act = "gelu";
  bool projection = false;
  int64_t num_heads = 0;  // when the names or shapes tell it (JAX's query kernel: (D, heads, head_dim)); else 0
};
// Converts into timm's names by one converter per source (model/layouts/): the layout's source
// is picked once by marker keys (timm: OpenAI CLIP, DeiT, DINOv2, ViT; Hugging Face: DINOv2, DeiT,
// CLIP, ViT; torchvision: one), then renamed by its rules (Hugging Face's q/k/v concatenated into
// qkv, CLIP's class and position embeddings reshaped, DINOv2-with-registers' class position folded
// into its class token). A timm-layout file with norm_pre and no patch-embedding bias is OpenAI
// CLIP (QuickGELU, eps 1e-5; a head with an all-zero bias is its projection).
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

}  // namespace vit::model
