// Bicubic resampling (see interpolate.h), following ATen's upsample_bicubic2d.
#include "kernels/interpolate.h"

#include <algorithm>
#include <cmath>

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

template void bicubic_resize<float>(const float*, int64_t, int64_t, int64_t, float*, int64_t, int64_t, bool);
template void bicubic_resize<double>(const double*, int64_t, int64_t, int64_t, double*, int64_t, int64_t, bool);

}  // namespace vit::kernels
