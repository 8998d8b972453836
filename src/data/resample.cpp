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
  VIT_CHECK(height > 0 && width > 0, "preprocess", "cannot resize to {}x{}", height, width);
  const int64_t C = image.channels, H = image.height, W = image.width;
  Image current = image;
  if (width != W) {  // horizontal pass
    const Coefficients k = precompute(W, width, filter);
    Image out{C, H, width, std::vector<uint8_t>(static_cast<size_t>(C * H * width))};
    for (int64_t r = 0; r < C * H; ++r) {
      const uint8_t* row = current.pixels.data() + r * W;
      uint8_t* dst = out.pixels.data() + r * width;
      for (int64_t x = 0; x < width; ++x) {
        double acc = 0.0;
        const double* w = k.weights.data() + x * k.window;
        const uint8_t* src = row + k.start[x];
        for (int64_t i = 0; i < k.count[x]; ++i) acc += w[i] * src[i];
        dst[x] = clip8(acc);
      }
    }
    current = std::move(out);
  }
  if (height != H) {  // vertical pass, row by row
    const Coefficients k = precompute(H, height, filter);
    const int64_t Wc = current.width;
    Image out{C, height, Wc, std::vector<uint8_t>(static_cast<size_t>(C * height * Wc))};
    std::vector<double> acc(static_cast<size_t>(Wc));
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < height; ++y) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const double* w = k.weights.data() + y * k.window;
        for (int64_t i = 0; i < k.count[y]; ++i) {
          const uint8_t* src = current.pixels.data() + (c * H + k.start[y] + i) * Wc;
          const double wi = w[i];
          for (int64_t x = 0; x < Wc; ++x) acc[static_cast<size_t>(x)] += wi * src[x];
        }
        uint8_t* dst = out.pixels.data() + (c * height + y) * Wc;
        for (int64_t x = 0; x < Wc; ++x) dst[x] = clip8(acc[static_cast<size_t>(x)]);
      }
    }
    current = std::move(out);
  }
  return current;
}

}  // namespace vit::data
