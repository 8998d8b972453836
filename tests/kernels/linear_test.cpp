// The fused Linear kernel of the inference path against a double reference: every epilogue,
// with and without bias, row/feature counts around the 16-row panels and 6-feature blocks,
// strided A and C.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/linear.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::random_vector;

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

void check(int64_t M, int64_t K, int64_t N, Epilogue epilogue, bool with_bias, int64_t pad) {
  const int64_t lda = K + pad, ldc = N + 2 * pad;
  const std::vector<float> A = random_vector<float>(M * lda, 1 + M + K), W = random_vector<float>(N * K, 2 + N),
                           bias = random_vector<float>(N, 3);
  std::vector<float> C = random_vector<float>(M * ldc, 4 + N);  // Accumulate adds to this
  const std::vector<float> before = C;
  linear_forward(A.data(), M, K, lda, W.data(), N, with_bias ? bias.data() : nullptr, C.data(), ldc, epilogue);
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < ldc; ++n) {
      const double got = C[m * ldc + n];
      if (n >= N) {  // the row padding is never written
        ASSERT_EQ(got, before[m * ldc + n]) << "wrote past N at row " << m;
        continue;
      }
      double dot = with_bias ? bias[n] : 0.0, scale = std::abs(dot);
      for (int64_t k = 0; k < K; ++k) {
        dot += static_cast<double>(A[m * lda + k]) * W[n * K + k];
        scale += std::abs(static_cast<double>(A[m * lda + k]) * W[n * K + k]);
      }
      const double want = epilogue == Epilogue::Gelu         ? gelu_ref(dot)
                          : epilogue == Epilogue::Accumulate ? before[m * ldc + n] + dot
                                                             : dot;
      worst = std::max(worst, std::abs(got - want) / (1.0 + scale));
    }
  }
  EXPECT_LT(worst, test::kLinearKernelTol) << "M=" << M << " K=" << K << " N=" << N << " epilogue "
                                           << static_cast<int>(epilogue) << " bias " << with_bias;
}

TEST(Linear, MatchesReferenceAroundPanelAndBlockEdges) {
  if (!linear_supported()) {  // a CPU without AVX2 + FMA: the kernel refuses, callers use BLAS
    std::vector<float> x(4, 1.0f);
    EXPECT_THROW(linear_forward(x.data(), 1, 2, 2, x.data(), 2, nullptr, x.data() + 2, 2, Epilogue::Store), Error);
    return;
  }
  for (int64_t M : {1, 5, 16, 17, 33, 197}) {
    for (int64_t N : {1, 6, 10, 17, 64}) {
      for (int64_t K : {1, 7, 64}) check(M, K, N, Epilogue::Store, true, 0);
    }
  }
  for (Epilogue e : {Epilogue::Store, Epilogue::Accumulate, Epilogue::Gelu}) {
    for (bool bias : {false, true}) {
      check(197, 192, 576, e, bias, 0);
      check(50, 65, 23, e, bias, 3);
    }
  }
}

TEST(Linear, EmptyBatchIsANoOpAndBadSizesAreRefused) {
  std::vector<float> W(12, 1.0f), C(4, 7.0f);
  if (linear_supported()) linear_forward(nullptr, 0, 3, 3, W.data(), 4, nullptr, C.data(), 4, Epilogue::Store);
  if (linear_supported()) {
    EXPECT_EQ(C, std::vector<float>(4, 7.0f));
  }
  EXPECT_THROW(linear_forward(C.data(), 1, 3, 2, W.data(), 4, nullptr, C.data(), 4, Epilogue::Store), Error);
}

}  // namespace
}  // namespace vit::kernels
