// Pillow's resampling of 8-bit images (ImagingResample): a separable filter whose support grows
// with the downscale factor (antialiased), horizontal pass then vertical pass, each rounded to 8
// bits. Evaluation resizes with it (bit for bit Pillow's, tested against its output), and so does
// the training loader (bilinear: torchvision's RandomResizedCrop and Resize default).
#pragma once

#include <cstdint>

#include "data/image.h"

namespace vit::data {

enum class Resample { Bilinear, Bicubic };

// PIL's Image.resize((width, height), filter) of a (C, H, W) image.
Image resample(const Image& image, int64_t height, int64_t width, Resample filter);
// The window [top, top + out_h) x [left, left + out_w) of that resize (what a center crop after it
// keeps), computed alone: the same pixels, without the rows and columns the crop drops (and the
// horizontal pass only over the input rows the window's rows read, as Pillow does too).
Image resample_window(const Image& image, int64_t height, int64_t width, Resample filter, int64_t top, int64_t left,
                      int64_t out_h, int64_t out_w);

}  // namespace vit::data
