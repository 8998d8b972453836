// The GEMM kernels' shared test: random operands for a case (padded row strides, NaN planted in
// C when beta is 0, since it must be ignored), and the check of every element of C against a
// double reference, padding included (it must not be written).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/gemm/packed_gemm.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels::test {

// C (M, N) = act(alpha * op(A) @ op(B) + beta * C + bias)
struct GemmCase {
  int64_t M, N, K;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  Activation act = Activation::None;
  int64_t pad = 0;  // extra row stride of A, B and C
};

inline std::string describe(const GemmCase& c) {
  return fmt::format("M={} N={} K={} trans_a={} trans_b={} alpha={} beta={} bias={} act={} pad={}", c.M, c.N, c.K,
                     c.trans_a, c.trans_b, c.alpha, c.beta, c.bias, static_cast<int>(c.act), c.pad);
}

inline double activation_formula(Activation a, double x) {
  if (a == Activation::Gelu) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (a == Activation::GeluTanh) return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  if (a == Activation::Relu) return x > 0.0 ? x : 0.0;
  return x;
}

// The operands of a case; C is the kernel's output buffer, before its copy as it was.
struct GemmOperands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, bias, C, before;

  GemmOperands(const GemmCase& c, uint64_t seed)
      : lda((c.trans_a ? c.M : c.K) + c.pad), ldb((c.trans_b ? c.K : c.N) + c.pad), ldc(c.N + c.pad) {
    const int64_t a_rows = c.trans_a ? c.K : c.M, b_rows = c.trans_b ? c.N : c.K;
    A = random_vector<float>(std::max<int64_t>(1, a_rows * lda), seed + 1 + c.M + c.K);
    B = random_vector<float>(std::max<int64_t>(1, b_rows * ldb), seed + 2 + c.N);
    bias = random_vector<float>(std::max<int64_t>(1, c.N), seed + 3);
    C = random_vector<float>(std::max<int64_t>(1, c.M * ldc), seed + 4 + c.N);
    if (c.beta == 0.0f && c.M > 0 && c.N > 0) C[0] = std::numeric_limits<float>::quiet_NaN();  // must be ignored
    before = C;
  }
};

// Every element of o.C against the double reference (relative to the sum of |products|), and
// the padding past N untouched.
inline void expect_matches_reference(const GemmCase& c, const GemmOperands& o) {
  double worst = 0;
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < o.ldc; ++n) {
      const float got = o.C[m * o.ldc + n];
      if (n >= c.N) {
        ASSERT_EQ(got, o.before[m * o.ldc + n]) << "wrote past N at row " << m << ": " << describe(c);
        continue;
      }
      double dot = 0, scale = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.trans_a ? o.A[k * o.lda + m] : o.A[m * o.lda + k];
        const double b = c.trans_b ? o.B[n * o.ldb + k] : o.B[k * o.ldb + n];
        dot += a * b;
        scale += std::abs(a * b);
      }
      double want = c.alpha * dot;
      if (c.beta != 0.0f) want += c.beta * static_cast<double>(o.before[m * o.ldc + n]);
      if (c.bias) want += o.bias[n];
      want = activation_formula(c.act, want);
      ASSERT_TRUE(std::isfinite(got)) << "m=" << m << " n=" << n << ": " << describe(c);
      worst = std::max(worst, std::abs(got - want) / (1.0 + std::abs(c.alpha) * scale + std::abs(c.beta)));
    }
  }
  EXPECT_LT(worst, kLinearKernelTol) << describe(c);
}

}  // namespace vit::kernels::test
