// PIL-compatible resampling and the evaluation transform (see preprocess.h).
#include "infer/preprocess.h"

#include <cfenv>
#include <cmath>

namespace vit::infer {
namespace {

double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {  // Pillow's a = -0.5
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

struct Coefficients {
  std::vector<int64_t> start, count;
  std::vector<double> weights;  // count.size() x window
  int64_t window = 0;
};

// Pillow's precompute_coeffs for one axis.
Coefficients precompute(int64_t in_size, int64_t out_size, Filter filter) {
  const double support_base = filter == Filter::Bilinear ? 1.0 : 2.0;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_base * filter_scale;
  Coefficients c;
  c.window = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.weights.assign(static_cast<size_t>(out_size * c.window), 0.0);
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    double total = 0.0;
    double* k = c.weights.data() + xx * c.window;
    for (int64_t x = 0; x < xmax; ++x) {
      const double arg = (static_cast<double>(x + xmin) - center + 0.5) * ss;
      k[x] = filter == Filter::Bilinear ? bilinear(arg) : bicubic(arg);
      total += k[x];
    }
    for (int64_t x = 0; x < xmax; ++x) k[x] = total != 0.0 ? k[x] / total : 0.0;
    c.start.push_back(xmin);
    c.count.push_back(xmax);
  }
  return c;
}

uint8_t clip8(double v) {
  const double r = std::floor(v + 0.5);
  return static_cast<uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
}

}  // namespace

Filter parse_filter(const std::string& name) {
  if (name == "bilinear") return Filter::Bilinear;
  if (name == "bicubic") return Filter::Bicubic;
  fail("preprocess", "unknown interpolation '{}' (bilinear or bicubic)", name);
}

const char* filter_name(Filter filter) { return filter == Filter::Bilinear ? "bilinear" : "bicubic"; }

data::Image resize_pil(const data::Image& image, int64_t height, int64_t width, Filter filter) {
  VIT_CHECK(height > 0 && width > 0, "preprocess", "cannot resize to {}x{}", height, width);
  const int64_t C = image.channels, H = image.height, W = image.width;
  data::Image current = image;
  if (width != W) {  // horizontal pass
    const Coefficients k = precompute(W, width, filter);
    data::Image out{C, H, width, std::vector<uint8_t>(static_cast<size_t>(C * H * width))};
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < H; ++y) {
        const uint8_t* row = current.pixels.data() + (c * H + y) * W;
        for (int64_t x = 0; x < width; ++x) {
          double acc = 0.0;
          const double* w = k.weights.data() + x * k.window;
          for (int64_t i = 0; i < k.count[x]; ++i) acc += w[i] * row[k.start[x] + i];
          out.pixels[(c * H + y) * width + x] = clip8(acc);
        }
      }
    }
    current = std::move(out);
  }
  if (height != H) {  // vertical pass
    const Coefficients k = precompute(H, height, filter);
    const int64_t Wc = current.width;
    data::Image out{C, height, Wc, std::vector<uint8_t>(static_cast<size_t>(C * height * Wc))};
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < height; ++y) {
        const double* w = k.weights.data() + y * k.window;
        for (int64_t x = 0; x < Wc; ++x) {
          double acc = 0.0;
          for (int64_t i = 0; i < k.count[y]; ++i) acc += w[i] * current.pixels[(c * H + k.start[y] + i) * Wc + x];
          out.pixels[(c * height + y) * Wc + x] = clip8(acc);
        }
      }
    }
    current = std::move(out);
  }
  return current;
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
  data::Image resized = resize_pil(image, h, w, p.filter);
  if (p.crop > 0) resized = center_crop(resized, p.crop);
  return resized;
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
