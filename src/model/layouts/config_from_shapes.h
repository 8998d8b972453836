// What the tensor shapes of timm-named weights tell of their model, for files that carry no config
// (foreign weights once to_timm has renamed them; checkpoint/ also checks our own files' recorded
// config against it): the ViTConfig they imply, the standard head count of a width (the one thing
// shapes cannot tell) and the LayerNorm eps of a layout.
#pragma once

#include <cstdint>
#include <string>

#include "model/layouts/layout.h"
#include "model/vit_config.h"

namespace vit::model {

// Infers a config from timm-named weights: the prefix tokens (cls, dist, reg), whether the
// position table covers them, norm_pre, LayerScale, qk_norm, the head width (qkv rows / 3 /
// heads), a one-Linear MLP, token-wide block norms, the pooling (fc_norm: avg) and the heads.
// num_heads <= 0 picks the standard value for the width (192: 3, 384: 6, 768: 12, 1024: 16,
// 1280: 16) and refuses any other width, whose head count the shapes cannot tell (pass --heads);
// eps follows the layout (Converted's hints refine it).
ViTConfig infer_config(const NamedTensors& timm_weights, Layout layout, int64_t num_heads, const std::string& source);

int64_t default_num_heads(int64_t dim);  // 0 for a width that is not a standard one
double default_eps(Layout layout);

}  // namespace vit::model
