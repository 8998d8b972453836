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

}  // namespace vit::data
