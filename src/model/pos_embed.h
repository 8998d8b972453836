// The position table of a ViT resampled to another grid of patches: how a model is run at an image
// size other than the one it was trained at (timm's resample_abs_pos_embed, torchvision's
// interpolate_embeddings). It knows no file layout: the table is (1, N, D) in timm's form.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vit::model {

// Position embedding (1, prefix + gh*gw, D) resampled to a new grid by bicubic interpolation,
// keeping the prefix (CLS) token: timm's resample_abs_pos_embed (align_corners false) or
// torchvision's interpolate_embeddings (align_corners true).
// antialias: PyTorch's antialiased bicubic (timm resamples checkpoints so; align_corners false).
Tensor resample_pos_embed(const Tensor& pos_embed, int64_t prefix_tokens, int64_t new_grid_h, int64_t new_grid_w,
                          bool align_corners, bool antialias = false);

}  // namespace vit::model
