// Pillow's separable resampling (see resample.h). Weights and sums in double, as Pillow's float
// path; the vertical pass runs row by row (each output row the weighted sum of input rows, added
// in the order of the taps, so every sum is the same as tap by tap per pixel).
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace vit::data {
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
Coefficients precompute(int64_t in_size, int64_t out_size, Resample filter) {
  const double support_base = filter == Resample::Bilinear ? 1.0 : 2.0;
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
      k[x] = filter == Resample::Bilinear ? bilinear(arg) : bicubic(arg);
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

Image resample(const Image& image, int64_t height, int64_t width, Resample filter) {
  return resample_window(image, height, width, filter, 0, 0, height, width);
}

Image resample_window(const Image& image, int64_t height, int64_t width, Resample filter, int64_t top, int64_t left,
                      int64_t out_h, int64_t out_w) {
  VIT_CHECK(height > 0 && width > 0, "preprocess", "cannot resize to {}x{}", height, width);
  VIT_CHECK(top >= 0 && left >= 0 && out_h > 0 && out_w > 0 && top + out_h <= height && left + out_w <= width,
            "preprocess", "window {}x{} at ({}, {}) is not inside the {}x{} resize", out_h, out_w, top, left, height,
            width);
  const int64_t C = image.channels, H = image.height, W = image.width;
  // The input rows the window's output rows read (all of the window's rows when there is no
  // vertical pass).
  Coefficients ky;
  int64_t r0 = top, r1 = top + out_h;
  if (height != H) {
    ky = precompute(H, height, filter);
    r0 = H;
    r1 = 0;
    for (int64_t y = top; y < top + out_h; ++y) {
      r0 = std::min(r0, ky.start[y]);
      r1 = std::max(r1, ky.start[y] + ky.count[y]);
    }
  }
  const int64_t rows = r1 - r0;
  // Horizontal pass over those rows, the window's columns only: (C, rows, out_w).
  Image across{C, rows, out_w, std::vector<uint8_t>(static_cast<size_t>(C * rows * out_w))};
  const Coefficients kx = width != W ? precompute(W, width, filter) : Coefficients{};
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = image.pixels.data() + (c * H + r0 + r) * W;
      uint8_t* dst = across.pixels.data() + (c * rows + r) * out_w;
      if (width == W) {
        std::copy(row + left, row + left + out_w, dst);
        continue;
      }
      for (int64_t x = 0; x < out_w; ++x) {
        double acc = 0.0;
        const double* w = kx.weights.data() + (left + x) * kx.window;
        const uint8_t* src = row + kx.start[left + x];
        for (int64_t i = 0; i < kx.count[left + x]; ++i) acc += w[i] * src[i];
        dst[x] = clip8(acc);
      }
    }
  }
  if (height == H) return across;
  // Vertical pass, row by row, over the window's rows.
  Image out{C, out_h, out_w, std::vector<uint8_t>(static_cast<size_t>(C * out_h * out_w))};
  std::vector<double> acc(static_cast<size_t>(out_w));
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t y = 0; y < out_h; ++y) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const double* w = ky.weights.data() + (top + y) * ky.window;
      for (int64_t i = 0; i < ky.count[top + y]; ++i) {
        const uint8_t* src = across.pixels.data() + (c * rows + ky.start[top + y] - r0 + i) * out_w;
        const double wi = w[i];
        for (int64_t x = 0; x < out_w; ++x) acc[static_cast<size_t>(x)] += wi * src[x];
      }
      uint8_t* dst = out.pixels.data() + (c * out_h + y) * out_w;
      for (int64_t x = 0; x < out_w; ++x) dst[x] = clip8(acc[static_cast<size_t>(x)]);
    }
  }
  return out;
}

}  // namespace vit::data
