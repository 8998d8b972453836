// The Linear kernel (both of its paths: the AVX2 micro-kernel and the BLAS fallback) against a
// double reference: every epilogue, with and without bias, row/feature counts around the 16-row
// panels and 6-feature blocks, strided A and C; linear_forward_ref against the same reference.
#include "kernels/linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu_features.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::random_vector;

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

enum class Impl { Auto, Avx2, Blas, Ref };  // Auto: the best micro-kernel here; Avx2: forced

void check(int64_t M, int64_t K, int64_t N, Epilogue epilogue, bool with_bias, int64_t pad, Impl impl = Impl::Auto) {
  const int64_t lda = K + pad, ldc = N + 2 * pad;
  const std::vector<float> A = random_vector<float>(M * lda, 1 + M + K), W = random_vector<float>(N * K, 2 + N),
                           bias = random_vector<float>(N, 3);
  std::vector<float> C = random_vector<float>(M * ldc, 4 + N);  // Accumulate adds to this
  const std::vector<float> before = C;
  const float* b = with_bias ? bias.data() : nullptr;
  if (impl == Impl::Ref) {
    linear_forward_ref<float>(A.data(), M, K, lda, W.data(), N, b, C.data(), ldc, epilogue);
  } else {
    const ScopedIsaLimit path(impl == Impl::Blas   ? Isa::Scalar  // Scalar: the BLAS fallback
                              : impl == Impl::Avx2 ? Isa::Avx2
                                                   : isa_limit());
    linear_forward<float>(A.data(), M, K, lda, W.data(), N, b, C.data(), ldc, epilogue);
  }
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
      const double v = dot + (epilogue.beta != 0.0f ? epilogue.beta * before[m * ldc + n] : 0.0);
      const double want = epilogue.act == Activation::Gelu       ? gelu_ref(v)
                          : epilogue.act == Activation::GeluTanh ? gelu_tanh_ref(v)
                          : epilogue.act == Activation::Relu     ? std::max(v, 0.0)
                                                                 : v;
      worst = std::max(worst, std::abs(got - want) / (1.0 + scale));
    }
  }
  EXPECT_LT(worst, test::kLinearKernelTol)
      << "M=" << M << " K=" << K << " N=" << N << " epilogue " << activation_name(epilogue.act) << " beta "
      << epilogue.beta << " bias " << with_bias << " impl " << static_cast<int>(impl);
}

TEST(Linear, MatchesReferenceAroundPanelAndBlockEdges) {
  for (Impl impl : {Impl::Auto, Impl::Avx2, Impl::Blas, Impl::Ref}) {
    for (int64_t M : {1, 5, 16, 17, 33, 197}) {
      for (int64_t N : {1, 6, 10, 17, 64}) {
        for (int64_t K : {1, 7, 64}) check(M, K, N, Epilogue::Store, true, 0, impl);
      }
    }
    for (Epilogue e : {Epilogue::Store, Epilogue::Accumulate, Epilogue::Gelu, Epilogue::GeluTanh, Epilogue::Relu,
                       Epilogue{1.0f, 1.0f, Activation::Relu}}) {
      for (bool bias : {false, true}) {
        check(197, 192, 576, e, bias, 0, impl);
        check(50, 65, 23, e, bias, 3, impl);
      }
    }
  }
}

// The double path (autograd's gradient checks run through it) against the reference.
TEST(Linear, DoubleMatchesReference) {
  const int64_t M = 7, K = 33, N = 10;
  const std::vector<double> A = random_vector<double>(M * K, 11), W = random_vector<double>(N * K, 12),
                            bias = random_vector<double>(N, 13);
  for (Epilogue e : {Epilogue::Store, Epilogue::Accumulate, Epilogue::Gelu, Epilogue::GeluTanh, Epilogue::Relu,
                     Epilogue{1.0f, 1.0f, Activation::Relu}}) {
    std::vector<double> C = random_vector<double>(M * N, 14), R = C;
    linear_forward<double>(A.data(), M, K, K, W.data(), N, bias.data(), C.data(), N, e);
    linear_forward_ref<double>(A.data(), M, K, K, W.data(), N, bias.data(), R.data(), N, e);
    for (size_t i = 0; i < C.size(); ++i)
      EXPECT_NEAR(C[i], R[i], test::kDoubleKernelTol) << "epilogue " << activation_name(e.act) << " beta " << e.beta;
  }
}

TEST(Linear, EmptyBatchIsANoOpAndBadSizesAreRefused) {
  std::vector<float> W(12, 1.0f), C(4, 7.0f);
  for (Isa path : {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar}) {  // the fast paths where they run, the BLAS fallback
    const ScopedIsaLimit limit(path);
    linear_forward<float>(nullptr, 0, 3, 3, W.data(), 4, nullptr, C.data(), 4, Epilogue::Store);
    EXPECT_EQ(C, std::vector<float>(4, 7.0f));
    EXPECT_THROW(linear_forward<float>(C.data(), 1, 3, 2, W.data(), 4, nullptr, C.data(), 4, Epilogue::Store), Error);
  }
}

}  // namespace
}  // namespace vit::kernels
