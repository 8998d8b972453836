// Branch-free float exp (for x <= 88.3) and erf that GCC vectorises (AVX2 + FMA) inside plain loops, for the
// float32 hot paths (GELU, softmax), and the one float32 GELU built on them (used by the activation
// kernels and by the Linear epilogues). exp: Cephes expf (range reduction by ln 2, degree-6
// polynomial), about 2 ulp. erf: Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7 -- the same
// formula ATen's Vectorized<float>::erf uses, so results track PyTorch's CPU kernels.
// Double paths keep std::exp / std::erf (the gradient checks run in double).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace vit::kernels {

// The GELU constants (double: the references and the double paths use them too).
inline constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1 / sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
inline constexpr double kGeluTanhCoeff = 0.044715;

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

// erf(x) given e = exp(-x^2) (exp_fast(-|x| * |x|)).
inline float erf_with_exp(float x, float e) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  const float r = 1.0f - poly * t * e;
  return std::copysign(r, x);
}

inline float erf_fast(float x) {
  const float ax = std::fabs(x);
  return erf_with_exp(x, exp_fast(-ax * ax));
}

// Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), and its derivative Phi(x) + x phi(x);
// erf's exp(-x^2 / 2) is phi's too (one exp for both).
inline float gelu_fast(float x) { return 0.5f * x * (1.0f + erf_fast(x * static_cast<float>(kSqrt1_2))); }
inline float gelu_grad_fast(float x) {
  const float u = x * static_cast<float>(kSqrt1_2), au = std::fabs(u);
  const float e = exp_fast(-au * au);  // exp(-x^2 / 2)
  const float cdf = 0.5f * (1.0f + erf_with_exp(u, e));
  return cdf + x * e * static_cast<float>(kInvSqrt2Pi);
}
// GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline float gelu_tanh_fast(float x) {
  return 0.5f * x *
         (1.0f + std::tanh(static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kGeluTanhCoeff) * x * x * x)));
}

}  // namespace vit::kernels
