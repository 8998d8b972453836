// The small-operand GEMM (kernels/gemm/small_gemm.h) against a double reference, on every ISA path
// (AVX-512 8 x 32 masked tile, AVX2 6 x 16 tile, the BLAS fallback: forced with ScopedIsaLimit):
// sizes around their register tiles (attention's 16- and 49-token heads included), all four
// transposes, alpha (0 ignores NaN in A and B), beta (0 ignores NaN in C), strided A, B and C
// (the padding is never written), K = 0, and calls from inside a parallel region (its B copy is
// per thread).
#include "kernels/gemm/small_gemm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm_test_util.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::random_vector;
using Case = test::GemmCase;

// Runs small_gemm and checks every element of C, padding included.
void check(const Case& c) {
  test::GemmOperands o(c, 10);
  small_gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, o.C.data(),
             o.ldc);
  test::expect_matches_reference(c, o);
}

TEST(SmallGemm, MatchesReferenceAroundTileEdgesForEveryTranspose) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (int64_t M : {1, 5, 6, 7, 8, 9, 13, 49}) {
      for (int64_t N : {1, 15, 16, 17, 31, 32, 33, 49}) {
        for (int64_t K : {1, 7, 16, 49}) {
          for (int t = 0; t < 4; ++t) check({M, N, K, (t & 1) != 0, (t & 2) != 0});
        }
      }
    }
  }
}

TEST(SmallGemm, AppliesAlphaAndBetaAndKeepsPaddingOfStridedOperands) {
  const Activation none = Activation::None;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const Case& c : {Case{49, 16, 49, false, false, 0.25f, 1.0f, false, none, 5},
                          Case{49, 16, 49, true, false, 1.0f, 1.0f, false, none, 3},
                          Case{49, 49, 16, false, true, 0.25f, 0.0f, false, none, 7},
                          Case{17, 33, 9, true, true, -2.0f, 0.5f, false, none, 1},
                          Case{197, 64, 197, false, false, 1.0f, 0.0f, false, none, 2},
                          Case{65, 197, 64, true, true, 0.5f, -1.0f, false, none, 1}}) {
      check(c);
    }
  }
}

TEST(SmallGemm, EmptyInnerDimensionScalesC) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    check({7, 17, 0, false, false, 1.0f, 0.5f});
    check({7, 17, 0, false, true, 1.0f, 0.0f});  // C = 0 (the NaN planted in C is not read)
    check({33, 40, 0, true, false, 2.0f, 1.0f});
  }
}

TEST(SmallGemm, AlphaZeroReadsNeitherOperand) {
  // C = beta C whatever A and B hold (NaN included), as BLAS does.
  constexpr int64_t M = 9, N = 33, K = 16;
  const std::vector<float> A(M * K, std::numeric_limits<float>::quiet_NaN()), B(K * N, 1.0f);
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    std::vector<float> C(M * N, 2.0f);
    small_gemm(false, false, M, N, K, 0.0f, A.data(), K, B.data(), N, 0.5f, C.data(), N);
    for (const float c : C) ASSERT_EQ(c, 1.0f) << isa_name(active_isa());
  }
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
