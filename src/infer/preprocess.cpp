// PIL-compatible resampling and the evaluation transform (see preprocess.h).
#include "infer/preprocess.h"

#include <cfenv>
#include <cmath>

namespace vit::infer {

Filter parse_filter(const std::string& name) {
  if (name == "bilinear") return Filter::Bilinear;
  if (name == "bicubic") return Filter::Bicubic;
  fail("preprocess", "unknown interpolation '{}' (bilinear or bicubic)", name);
}

const char* filter_name(Filter filter) { return filter == Filter::Bilinear ? "bilinear" : "bicubic"; }

data::Image resize_pil(const data::Image& image, int64_t height, int64_t width, Filter filter) {
  return data::resample(image, height, width, filter);
}

std::pair<int64_t, int64_t> resized_size(int64_t height, int64_t width, int64_t shorter) {
  if (height <= width) return {shorter, static_cast<int64_t>(static_cast<double>(shorter) * width / height)};
  return {static_cast<int64_t>(static_cast<double>(shorter) * height / width), shorter};
}

data::Image center_crop(const data::Image& image, int64_t size) {
  VIT_CHECK(size > 0 && size <= image.height && size <= image.width, "preprocess",
            "center crop {} is larger than the resized image {}x{}", size, image.height, image.width);
  std::fesetround(FE_TONEAREST);
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(image.height - size) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(image.width - size) / 2.0));
  data::Image out{image.channels, size, size, std::vector<uint8_t>(static_cast<size_t>(image.channels * size * size))};
  for (int64_t c = 0; c < image.channels; ++c) {
    for (int64_t y = 0; y < size; ++y) {
      for (int64_t x = 0; x < size; ++x) {
        out.pixels[(c * size + y) * size + x] = image.pixels[(c * image.height + top + y) * image.width + left + x];
      }
    }
  }
  return out;
}

std::string Preprocess::describe() const {
  return fmt::format("resize {}{} ({}), crop {}, mean ({}), std ({})", square ? "to " : "shorter side to ", resize,
                     filter_name(filter), crop, fmt::join(mean, ", "), fmt::join(std, ", "));
}

data::Image resize_and_crop(const data::Image& image, const Preprocess& p) {
  VIT_CHECK(p.resize > 0, "preprocess", "resize must be positive, got {}", p.resize);
  const auto [h, w] = p.square ? std::pair{p.resize, p.resize} : resized_size(image.height, image.width, p.resize);
  if (p.crop <= 0) return resize_pil(image, h, w, p.filter);
  VIT_CHECK(p.crop <= h && p.crop <= w, "preprocess", "center crop {} is larger than the resized image {}x{}", p.crop,
            h, w);
  // Only the crop is resampled (the same pixels as resizing all, then cropping).
  std::fesetround(FE_TONEAREST);
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(h - p.crop) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(w - p.crop) / 2.0));
  return data::resample_window(image, h, w, p.filter, top, left, p.crop, p.crop);
}

Tensor to_tensor(const data::Image& image, const Preprocess& p) {
  const data::Image resized = resize_and_crop(image, p);
  Tensor t = Tensor::empty({resized.channels, resized.height, resized.width});
  float* out = t.data<float>();
  for (size_t i = 0; i < resized.pixels.size(); ++i) out[i] = static_cast<float>(resized.pixels[i]) / 255.0f;
  return t;
}

void preprocess_into(const data::Image& image, const Preprocess& p, int64_t channels, float* out) {
  VIT_CHECK(static_cast<int64_t>(p.mean.size()) == channels && static_cast<int64_t>(p.std.size()) == channels,
            "preprocess", "mean/std have {}/{} values for {} channels", p.mean.size(), p.std.size(), channels);
  const Tensor t = to_tensor(data::convert_channels(image, channels), p);
  const int64_t plane = t.size(1) * t.size(2);
  const float* in = t.data<float>();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < plane; ++i) {
      out[c * plane + i] = static_cast<float>((in[c * plane + i] - p.mean[c]) / p.std[c]);
    }
  }
}

}  // namespace vit::infer
