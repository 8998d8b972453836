// Bicubic resampling of (C, H, W) planes exactly as torch.nn.functional.interpolate(
// mode='bicubic', antialias=False): cubic convolution with A = -0.75, borders clamped, source
// coordinates from align_corners (True: corners map to corners; False: pixel centres).
// Used to resample position embeddings to another image size (timm / torchvision).
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
void bicubic_resize(const T* in, int64_t channels, int64_t height, int64_t width, T* out, int64_t out_height,
                    int64_t out_width, bool align_corners);

// The same with antialias=True (PyTorch's _upsample_bicubic2d_aa, align_corners False): separable,
// each output pixel a normalised sum of the Keys cubic (A = -0.5) over a support widened by the
// scale when shrinking, so every source pixel counts (timm resamples checkpoints' position
// embeddings this way). Rows first, then columns, as PyTorch does.
template <typename T>
void bicubic_resize_antialias(const T* in, int64_t channels, int64_t height, int64_t width, T* out, int64_t out_height,
                              int64_t out_width);

}  // namespace vit::kernels
