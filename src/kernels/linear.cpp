// Linear forward: the packed GEMM, the BLAS fallback and the reference (see linear.h).
#include "kernels/linear.h"

#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/threads.h"

namespace vit::kernels {
namespace {

// The fallback: BLAS for the product (accumulating into C for Accumulate), then the bias and
// the epilogue in one pass over the rows.
template <typename T>
void linear_blas(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C, int64_t ldc,
                 const Epilogue& e) {
  gemm<T>(false, true, M, N, K, T(e.alpha), A, lda, W, K, T(e.beta), C, ldc);
  if (!bias && e.act == Activation::None) return;
  // After the GEMM, C holds alpha A W^T + beta C: the epilogue only adds the bias and activates.
  with_activation(e.act, [&]<Activation Act>() {
    parallel_for(M, M * N > (1 << 15), [&](int64_t m) {
      T* __restrict c = C + m * ldc;
      for (int64_t n = 0; n < N; ++n) {
        const T v = c[n] + (bias ? bias[n] : T(0));
        if constexpr (std::is_same_v<T, float>) {
          c[n] = activate<Act>(v);
        } else {
          c[n] = Act == Activation::None ? v : static_cast<T>(activate_ref(Act, static_cast<double>(v)));
        }
      }
    });
  });
}

}  // namespace

template <typename T>
void linear_forward(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                    int64_t ldc, const Epilogue& epilogue) {
  VIT_CHECK(M >= 0 && K >= 0 && N >= 0 && lda >= K && ldc >= N, "linear", "invalid sizes M={} K={} N={} lda={} ldc={}",
            M, K, N, lda, ldc);
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (packed_gemm_supported()) {
      gemm_packed(false, true, M, N, K, A, lda, W, std::max<int64_t>(K, 1), C, ldc, bias, epilogue);
      return;
    }
  }
  linear_blas<T>(A, M, K, std::max<int64_t>(lda, 1), W, N, bias, C, ldc, epilogue);
}

void linear_forward_packed(const float* A, int64_t M, int64_t K, int64_t lda, const PackedMatrix& W, const float* bias,
                           float* C, int64_t ldc, const Epilogue& epilogue) {
  VIT_CHECK(W.rows() == K && lda >= K, "linear", "packed weight ({} x {}) for inputs of width {} (lda={})", W.cols(),
            W.rows(), K, lda);
  packed_gemm(false, A, lda, M, W.data(), K, W.cols(), C, ldc, bias, epilogue);
}

template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, const Epilogue& e) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(A[m * lda + k]) * static_cast<double>(W[n * K + k]);
      T& c = C[m * ldc + n];
      double v = e.alpha * sum + (bias ? static_cast<double>(bias[n]) : 0.0);
      if (e.beta != 0.0f) v += e.beta * static_cast<double>(c);  // beta 0: C is not read
      c = static_cast<T>(activate_ref(e.act, v));
    }
  }
}

#define VIT_INSTANTIATE(T)                                                                                           \
  template void linear_forward<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t,     \
                                  const Epilogue&);                                                                  \
  template void linear_forward_ref<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t, \
                                      const Epilogue&);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
