// The small-operand GEMM (kernels/small_gemm.h) against a double reference: sizes around its
// 6-row and 16-column register tile (attention's 16- and 49-token heads included), all four
// transposes, alpha, beta (0 ignores NaN in C), strided A, B and C (the padding is never
// written), K = 0, and calls from inside a parallel region (its B copy is per thread).
#include "kernels/small_gemm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::random_vector;

struct Case {
  int64_t M, N, K;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;  // extra row stride of A, B and C
};

std::string describe(const Case& c) {
  return fmt::format("M={} N={} K={} trans_a={} trans_b={} alpha={} beta={} pad={}", c.M, c.N, c.K, c.trans_a,
                     c.trans_b, c.alpha, c.beta, c.pad);
}

// Runs small_gemm and checks every element of C, padding included.
void check(const Case& c) {
  const int64_t lda = (c.trans_a ? c.M : c.K) + c.pad, ldb = (c.trans_b ? c.K : c.N) + c.pad, ldc = c.N + c.pad;
  const int64_t a_rows = c.trans_a ? c.K : c.M, b_rows = c.trans_b ? c.N : c.K;
  const std::vector<float> A = random_vector<float>(std::max<int64_t>(1, a_rows * lda), 11 + c.M + c.K),
                           B = random_vector<float>(std::max<int64_t>(1, b_rows * ldb), 12 + c.N);
  std::vector<float> C = random_vector<float>(std::max<int64_t>(1, c.M * ldc), 13 + c.N);
  if (c.beta == 0.0f && c.M > 0 && c.N > 0) C[0] = std::numeric_limits<float>::quiet_NaN();  // must be ignored
  const std::vector<float> before = C;
  small_gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
  double worst = 0;
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < ldc; ++n) {
      const float got = C[m * ldc + n];
      if (n >= c.N) {
        ASSERT_EQ(got, before[m * ldc + n]) << "wrote past N at row " << m << ": " << describe(c);
        continue;
      }
      double dot = 0, scale = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.trans_a ? A[k * lda + m] : A[m * lda + k];
        const double b = c.trans_b ? B[n * ldb + k] : B[k * ldb + n];
        dot += a * b;
        scale += std::abs(a * b);
      }
      double want = c.alpha * dot;
      if (c.beta != 0.0f) want += c.beta * static_cast<double>(before[m * ldc + n]);
      ASSERT_TRUE(std::isfinite(got)) << "m=" << m << " n=" << n << ": " << describe(c);
      worst = std::max(worst, std::abs(got - want) / (1.0 + std::abs(c.alpha) * scale + std::abs(c.beta)));
    }
  }
  EXPECT_LT(worst, test::kLinearKernelTol) << describe(c);
}

TEST(SmallGemm, MatchesReferenceAroundTileEdgesForEveryTranspose) {
  for (int64_t M : {1, 5, 6, 7, 13, 49}) {
    for (int64_t N : {1, 15, 16, 17, 33, 49}) {
      for (int64_t K : {1, 7, 16, 49}) {
        for (int t = 0; t < 4; ++t) check({M, N, K, (t & 1) != 0, (t & 2) != 0});
      }
    }
  }
}

TEST(SmallGemm, AppliesAlphaAndBetaAndKeepsPaddingOfStridedOperands) {
  for (const Case& c : {Case{49, 16, 49, false, false, 0.25f, 1.0f, 5}, Case{49, 16, 49, true, false, 1.0f, 1.0f, 3},
                        Case{49, 49, 16, false, true, 0.25f, 0.0f, 7}, Case{17, 33, 9, true, true, -2.0f, 0.5f, 1},
                        Case{197, 64, 197, false, false, 1.0f, 0.0f, 2}}) {
    check(c);
  }
}

TEST(SmallGemm, EmptyInnerDimensionScalesC) {
  check({7, 17, 0, false, false, 1.0f, 0.5f});
  check({7, 17, 0, false, true, 1.0f, 0.0f});  // C = 0 (the NaN planted in C is not read)
}

TEST(SmallGemm, ThreadsCallItConcurrently) {
  // Each thread has its own B copy: run transposed products (which copy) on many threads at once.
  constexpr int64_t M = 49, N = 49, K = 16;
  const std::vector<float> A = random_vector<float>(M * K, 21), B = random_vector<float>(N * K, 22);
  std::vector<float> want(M * N);
  small_gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, want.data(), N);
  std::vector<std::vector<float>> got(64, std::vector<float>(M * N));
#pragma omp parallel for schedule(static, 1)
  for (int i = 0; i < 64; ++i) small_gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, got[i].data(), N);
  for (const auto& g : got) EXPECT_EQ(g, want);
}

}  // namespace
}  // namespace vit::kernels
