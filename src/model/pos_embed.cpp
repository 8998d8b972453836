// The position table resampled to a new grid (see pos_embed.h).
#include "model/pos_embed.h"

#include <cmath>

#include "core/check.h"
#include "kernels/interpolate.h"

namespace vit::model {

Tensor resample_pos_embed(const Tensor& pos_embed, int64_t prefix_tokens, int64_t new_grid_h, int64_t new_grid_w,
                          bool align_corners, bool antialias) {
  VIT_CHECK(pos_embed.dim() == 3 && pos_embed.size(0) == 1, "pos_embed", "expected (1, N, D), got {}",
            shape_str(pos_embed.shape()));
  const int64_t D = pos_embed.size(2), patches = pos_embed.size(1) - prefix_tokens;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(patches))));
  VIT_CHECK(patches > 0 && grid * grid == patches, "pos_embed", "{} patch positions are not a square grid", patches);
  VIT_CHECK(new_grid_h > 0 && new_grid_w > 0, "pos_embed", "invalid target grid {}x{}", new_grid_h, new_grid_w);
  const Tensor pos = pos_embed.to(DType::F32).contiguous();
  // (1, gh*gw, D) -> (D, gh, gw) planes, resample, back to tokens.
  const Tensor planes =
      pos.slice(1, prefix_tokens, pos.size(1)).reshape({grid, grid, D}).permute({2, 0, 1}).contiguous();
  Tensor resampled = Tensor::empty({D, new_grid_h, new_grid_w});
  if (antialias) {
    VIT_CHECK(!align_corners, "pos_embed", "antialiased resampling has no align_corners form");
    kernels::bicubic_resize_antialias<float>(planes.data<float>(), D, grid, grid, resampled.data<float>(), new_grid_h,
                                             new_grid_w);
  } else {
    kernels::bicubic_resize<float>(planes.data<float>(), D, grid, grid, resampled.data<float>(), new_grid_h, new_grid_w,
                                   align_corners);
  }
  const Tensor tokens = resampled.permute({1, 2, 0}).reshape({1, new_grid_h * new_grid_w, D});
  return prefix_tokens > 0 ? cat({pos.slice(1, 0, prefix_tokens), tokens}, 1) : tokens.contiguous();
}

}  // namespace vit::model
