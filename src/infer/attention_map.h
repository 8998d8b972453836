// Where a ViT looks: the CLS token's attention in the last block (mean over heads) and attention
// rollout across all blocks (Abnar & Zuidema 2020: per block, head-mean A, then 0.5 A + 0.5 I,
// rows renormalised, multiplied from the first block to the last), as heat maps over the image.
// For mean-pooled models (no CLS token) the mean over all query tokens is used.
#pragma once

#include "data/image.h"
#include "infer/preprocess.h"
#include "model/vision_transformer.h"

namespace vit::infer {

struct AttentionMaps {
  int64_t grid = 0;                        // patches per side
  std::vector<float> last_layer, rollout;  // grid * grid weights each, summing to 1
  int64_t predicted_class = -1;            // -1: the model has no classifier (CLIP's projection, features only)
  float probability = 0.0f;
};

AttentionMaps attention_maps(model::VisionTransformer& model, const data::Image& image, const Preprocess& preprocess);

// [input | last-block CLS attention | rollout], each heat map blended over the input, scale x scale.
data::Image render_attention(const data::Image& image, const AttentionMaps& maps, int64_t size = 224);

}  // namespace vit::infer
