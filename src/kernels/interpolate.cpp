// Bicubic resampling (see interpolate.h), following ATen's upsample_bicubic2d.
#include "kernels/interpolate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace vit::kernels {
namespace {

constexpr double kA = -0.75;

double cubic1(double x) { return ((kA + 2) * x - (kA + 3)) * x * x + 1; }          // |x| <= 1
double cubic2(double x) { return ((kA * x - 5 * kA) * x + 8 * kA) * x - 4 * kA; }  // 1 < |x| < 2

void weights(double t, double w[4]) {
  w[0] = cubic2(t + 1.0);
  w[1] = cubic1(t);
  w[2] = cubic1(1.0 - t);
  w[3] = cubic2(2.0 - t);
}

double source_index(int64_t dst, int64_t in_size, int64_t out_size, bool align_corners) {
  if (align_corners) {
    return out_size > 1
               ? static_cast<double>(in_size - 1) / static_cast<double>(out_size - 1) * static_cast<double>(dst)
               : 0.0;
  }
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  return scale * (static_cast<double>(dst) + 0.5) - 0.5;  // not clamped for cubic, as in ATen
}

}  // namespace

template <typename T>
void bicubic_resize(const T* in, int64_t channels, int64_t height, int64_t width, T* out, int64_t out_height,
                    int64_t out_width, bool align_corners) {
  auto at = [&](const T* plane, int64_t y, int64_t x) {
    y = std::clamp<int64_t>(y, 0, height - 1);
    x = std::clamp<int64_t>(x, 0, width - 1);
    return static_cast<double>(plane[y * width + x]);
  };
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = in + c * height * width;
    for (int64_t oy = 0; oy < out_height; ++oy) {
      const double ry = source_index(oy, height, out_height, align_corners);
      const auto iy = static_cast<int64_t>(std::floor(ry));
      double wy[4];
      weights(ry - static_cast<double>(iy), wy);
      for (int64_t ox = 0; ox < out_width; ++ox) {
        const double rx = source_index(ox, width, out_width, align_corners);
        const auto ix = static_cast<int64_t>(std::floor(rx));
        double wx[4];
        weights(rx - static_cast<double>(ix), wx);
        double acc = 0.0;
        for (int64_t j = 0; j < 4; ++j) {
          double row = 0.0;
          for (int64_t i = 0; i < 4; ++i) row += wx[i] * at(plane, iy - 1 + j, ix - 1 + i);
          acc += wy[j] * row;
        }
        out[(c * out_height + oy) * out_width + ox] = static_cast<T>(acc);
      }
    }
  }
}

namespace {

// The taps of one output index along one axis: the first source index and normalised weights.
struct Taps {
  int64_t first = 0;
  std::vector<double> weights;
};

double keys_cubic(double x) {  // A = -0.5
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

std::vector<Taps> antialias_taps(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;  // bicubic: 4 taps, half-width 2
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  std::vector<Taps> taps(static_cast<size_t>(out_size));
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    Taps& t = taps[static_cast<size_t>(i)];
    t.first = lo;
    double total = 0.0;
    for (int64_t j = lo; j < hi; ++j) {
      t.weights.push_back(keys_cubic((static_cast<double>(j) - center + 0.5) * invscale));
      total += t.weights.back();
    }
    if (total != 0.0) {
      for (double& w : t.weights) w /= total;
    }
  }
  return taps;
}

}  // namespace

template <typename T>
void bicubic_resize_antialias(const T* in, int64_t channels, int64_t height, int64_t width, T* out, int64_t out_height,
                              int64_t out_width) {
  const std::vector<Taps> along_x = antialias_taps(width, out_width), along_y = antialias_taps(height, out_height);
  std::vector<double> rows(static_cast<size_t>(height * out_width));  // one plane resized along x
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = in + c * height * width;
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t ox = 0; ox < out_width; ++ox) {
        const Taps& t = along_x[static_cast<size_t>(ox)];
        double acc = 0.0;
        for (size_t k = 0; k < t.weights.size(); ++k) {
          acc += t.weights[k] * static_cast<double>(plane[y * width + t.first + static_cast<int64_t>(k)]);
        }
        rows[static_cast<size_t>(y * out_width + ox)] = static_cast<double>(static_cast<T>(acc));
      }
    }
    for (int64_t oy = 0; oy < out_height; ++oy) {
      const Taps& t = along_y[static_cast<size_t>(oy)];
      for (int64_t ox = 0; ox < out_width; ++ox) {
        double acc = 0.0;
        for (size_t k = 0; k < t.weights.size(); ++k) {
          acc += t.weights[k] * rows[static_cast<size_t>((t.first + static_cast<int64_t>(k)) * out_width + ox)];
        }
        out[(c * out_height + oy) * out_width + ox] = static_cast<T>(acc);
      }
    }
  }
}

template void bicubic_resize_antialias<float>(const float*, int64_t, int64_t, int64_t, float*, int64_t, int64_t);
template void bicubic_resize_antialias<double>(const double*, int64_t, int64_t, int64_t, double*, int64_t, int64_t);

template void bicubic_resize<float>(const float*, int64_t, int64_t, int64_t, float*, int64_t, int64_t, bool);
template void bicubic_resize<double>(const double*, int64_t, int64_t, int64_t, double*, int64_t, int64_t, bool);

}  // namespace vit::kernels
