// Branch-free float exp (for x <= 88.3) and erf that GCC vectorises (AVX2 + FMA) inside plain loops, for the
// float32 hot paths (GELU, softmax). exp: Cephes expf (range reduction by ln 2, degree-6
// polynomial), about 2 ulp. erf: Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7 -- the same
// formula ATen's Vectorized<float>::erf uses, so results track PyTorch's CPU kernels.
// Double paths keep std::exp / std::erf (the gradient checks run in double).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace vit::kernels {

inline float exp_fast(float input) {
  // Compare-and-select, not std::fmin/fmax: those must honour NaN rules and are not vectorised
  // without -ffast-math.
  // The upper clamp 88.3 keeps 2^fx a normal float (fx <= 127) so no overflow branch is needed;
  // callers here only pass x <= 0 (GELU, softmax).
  const float low = input < -87.33654f ? -87.33654f : input;
  const float x = low > 88.3f ? 88.3f : low;
  const float fx = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - fx * 0.693359375f;  // x - fx * ln 2, in two parts
  r = r - fx * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  // Scale by 2^fx through the exponent bits (fx in [-126, 127] after the clamp).
  const float scale = std::bit_cast<float>((static_cast<int32_t>(fx) + 127) << 23);
  const float result = y * scale;
  return input < -87.33654f ? 0.0f : result;  // underflow to 0 as expf does
}

inline float erf_fast(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float r = 1.0f - poly * t * exp_fast(-ax * ax);
  return std::copysign(r, x);
}

}  // namespace vit::kernels
