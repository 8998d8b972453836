// vmath.h's exact GELU on eight floats in AVX2 registers, for the GEMM micro-kernels that apply it
// to the accumulators they hold (no tile buffer, no second pass). The very steps of gelu_fast, in
// its order, each multiply and add rounded on its own (no fused multiply-add): bit for bit what the
// tile stores compute (packed_micro.cpp is compiled without contraction), NaN and +-Inf included.
#pragma once

#include <immintrin.h>

#include "kernels/isa_target.h"
#include "kernels/vmath.h"

namespace vit::kernels {

namespace vmath_detail {
VIT_TARGET_AVX2 inline __m256 c(float v) { return _mm256_set1_ps(v); }
}  // namespace vmath_detail

VIT_TARGET_AVX2 inline __m256 gelu_avx2(__m256 x) {
  using vmath_detail::c;
  const __m256 sign = c(-0.0f), one = c(1.0f);
  const __m256 u = _mm256_mul_ps(x, c(static_cast<float>(kSqrt1_2)));
  const __m256 au = _mm256_andnot_ps(sign, u);
  // e = exp_fast(-u^2): clamp (max/min with the constant first keep a NaN), n = floor(x log2 e +
  // 1/2), r = x - n ln 2 in two parts, the degree-6 polynomial, 2^n through the exponent bits, 0
  // below -87.34.
  const __m256 in = _mm256_mul_ps(_mm256_xor_ps(au, sign), au);
  const __m256 lo = c(-87.33654f);
  const __m256 xe = _mm256_min_ps(c(88.3f), _mm256_max_ps(lo, in));
  const __m256 fx = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(xe, c(1.44269504088896341f)), c(0.5f)));
  __m256 r = _mm256_sub_ps(xe, _mm256_mul_ps(fx, c(0.693359375f)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(fx, c(-2.12194440e-4f)));
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = c(1.9875691500e-4f);
  y = _mm256_add_ps(_mm256_mul_ps(y, r), c(1.3981999507e-3f));
  y = _mm256_add_ps(_mm256_mul_ps(y, r), c(8.3334519073e-3f));
  y = _mm256_add_ps(_mm256_mul_ps(y, r), c(4.1665795894e-2f));
  y = _mm256_add_ps(_mm256_mul_ps(y, r), c(1.6666665459e-1f));
  y = _mm256_add_ps(_mm256_mul_ps(y, r), c(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(y, z), r), one);
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  __m256 e = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  e = _mm256_andnot_ps(_mm256_cmp_ps(in, lo, _CMP_LT_OQ), e);
  // erf = copysign(1 - poly(t) t e, u) with t = 1 / (1 + p |u|).
  const __m256 t = _mm256_div_ps(one, _mm256_add_ps(one, _mm256_mul_ps(c(0.3275911f), au)));
  __m256 poly = c(1.061405429f);
  poly = _mm256_sub_ps(_mm256_mul_ps(poly, t), c(1.453152027f));
  poly = _mm256_add_ps(_mm256_mul_ps(poly, t), c(1.421413741f));
  poly = _mm256_sub_ps(_mm256_mul_ps(poly, t), c(0.284496736f));
  poly = _mm256_add_ps(_mm256_mul_ps(poly, t), c(0.254829592f));
  const __m256 erf_abs = _mm256_sub_ps(one, _mm256_mul_ps(_mm256_mul_ps(poly, t), e));
  const __m256 erf = _mm256_or_ps(_mm256_andnot_ps(sign, erf_abs), _mm256_and_ps(sign, u));
  return _mm256_mul_ps(_mm256_mul_ps(c(0.5f), x), _mm256_add_ps(one, erf));  // 0.5 x (1 + erf)
}

}  // namespace vit::kernels
