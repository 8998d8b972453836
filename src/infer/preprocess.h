// Image preprocessing as torchvision / timm / Hugging Face do it for evaluation:
//   resize (the shorter side to `resize`, or to exactly resize x resize), with PIL's antialiased
//   bilinear or bicubic resampling; center crop to `crop` (torchvision's rounding); scale to
//   [0, 1]; normalise with per-channel mean / std.
// Resampling follows Pillow's ImagingResample: a separable filter whose support grows with the
// downscale factor, horizontal pass then vertical pass, each rounded to 8 bits.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/image.h"
#include "data/resample.h"

namespace vit::infer {

using Filter = data::Resample;
Filter parse_filter(const std::string& name);  // "bilinear" | "bicubic"
const char* filter_name(Filter filter);

// PIL's Image.resize(size, filter) on an 8-bit image.
data::Image resize_pil(const data::Image& image, int64_t height, int64_t width, Filter filter);

struct Preprocess {
  int64_t resize = 224;  // target of the resize step (see `square`)
  bool square = false;   // true: resize to resize x resize; false: the shorter side to resize
  int64_t crop = 224;    // center crop size (0: no crop)
  Filter filter = Filter::Bicubic;
  std::vector<double> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5};
  std::string describe() const;
};

// torchvision's Resize(int): shorter side -> size, longer -> int(size * long / short).
std::pair<int64_t, int64_t> resized_size(int64_t height, int64_t width, int64_t shorter);
// torchvision's CenterCrop offsets (round half to even, like Python's round).
data::Image center_crop(const data::Image& image, int64_t size);

// Resize + crop, 8-bit: the geometric part of the pipeline (an image folder's images are shaped by
// it for `vit eval`, as `vit predict` shapes each image).
data::Image resize_and_crop(const data::Image& image, const Preprocess& p);
// Resize + crop + ToTensor: (C, H, W) floats in [0, 1], before normalisation.
Tensor to_tensor(const data::Image& image, const Preprocess& p);
// Full pipeline into out (C, H, W): channels converted to `channels`, then normalised.
void preprocess_into(const data::Image& image, const Preprocess& p, int64_t channels, float* out);

}  // namespace vit::infer
