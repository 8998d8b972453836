// Linear forward: the packed GEMM, the BLAS fallback and the reference (see linear.h).
#include "kernels/linear.h"

#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/gemm.h"
#include "kernels/packed_gemm.h"
#include "kernels/vmath.h"

namespace vit::kernels {
namespace {

// The epilogue on one element: v = (A W^T)[m][n] + bias[n], c = C[m][n] before the call.
// Float32 GELU is vmath.h's (the activation kernels use the same); double uses the activation
// reference (the double path serves the gradient checks).
template <Epilogue E, typename T>
inline T finish(T v, T c) {
  if constexpr (E == Epilogue::Store) {
    return v;
  } else if constexpr (E == Epilogue::Accumulate) {
    return c + v;
  } else if constexpr (std::is_same_v<T, float>) {
    return E == Epilogue::Gelu ? gelu_fast(v) : gelu_tanh_fast(v);
  } else {
    return static_cast<T>(unary_ref(E == Epilogue::Gelu ? Unary::Gelu : Unary::GeluTanh, static_cast<double>(v)));
  }
}

// Calls fn.template operator()<E>() with the epilogue as a compile-time constant.
template <typename Fn>
void with_epilogue(Epilogue e, Fn&& fn) {
  switch (e) {
    case Epilogue::Store:
      fn.template operator()<Epilogue::Store>();
      break;
    case Epilogue::Accumulate:
      fn.template operator()<Epilogue::Accumulate>();
      break;
    case Epilogue::Gelu:
      fn.template operator()<Epilogue::Gelu>();
      break;
    case Epilogue::GeluTanh:
      fn.template operator()<Epilogue::GeluTanh>();
      break;
  }
}

GemmEpilogue packed_epilogue(const float* bias, Epilogue epilogue) {
  GemmEpilogue e;
  e.beta = epilogue == Epilogue::Accumulate ? 1.0f : 0.0f;
  e.bias = bias;
  e.act = epilogue == Epilogue::Gelu       ? Activation::Gelu
          : epilogue == Epilogue::GeluTanh ? Activation::GeluTanh
                                           : Activation::None;
  return e;
}

// The fallback: BLAS for the product (accumulating into C for Accumulate), then the bias and
// the epilogue in one pass over the rows.
template <typename T>
void linear_blas(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C, int64_t ldc,
                 Epilogue epilogue) {
  const bool accumulate = epilogue == Epilogue::Accumulate;
  gemm<T>(false, true, M, N, K, T(1), A, lda, W, K, accumulate ? T(1) : T(0), C, ldc);
  if (!bias && (epilogue == Epilogue::Store || accumulate)) return;
  with_epilogue(epilogue, [&]<Epilogue E>() {
    // After the GEMM, C holds the sum: the epilogue only adds the bias (or applies GELU).
    constexpr Epilogue After = E == Epilogue::Accumulate ? Epilogue::Store : E;
#pragma omp parallel for schedule(static) if (M * N > (1 << 15))
    for (int64_t m = 0; m < M; ++m) {
      T* __restrict c = C + m * ldc;
      for (int64_t n = 0; n < N; ++n) c[n] = finish<After>(c[n] + (bias ? bias[n] : T(0)), c[n]);
    }
  });
}

}  // namespace

template <typename T>
void linear_forward(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                    int64_t ldc, Epilogue epilogue, LinearPath path) {
  VIT_CHECK(M >= 0 && K >= 0 && N >= 0 && lda >= K && ldc >= N, "linear", "invalid sizes M={} K={} N={} lda={} ldc={}",
            M, K, N, lda, ldc);
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (path == LinearPath::Auto && packed_gemm_supported()) {
      gemm_packed(false, true, M, N, K, A, lda, W, std::max<int64_t>(K, 1), C, ldc, packed_epilogue(bias, epilogue));
      return;
    }
  }
  linear_blas<T>(A, M, K, std::max<int64_t>(lda, 1), W, N, bias, C, ldc, epilogue);
}

void linear_forward_packed(const float* A, int64_t M, int64_t K, int64_t lda, const PackedMatrix& W, const float* bias,
                           float* C, int64_t ldc, Epilogue epilogue) {
  VIT_CHECK(W.rows() == K && lda >= K, "linear", "packed weight ({} x {}) for inputs of width {} (lda={})", W.cols(),
            W.rows(), K, lda);
  packed_gemm(false, A, lda, M, W.data(), K, W.cols(), C, ldc, packed_epilogue(bias, epilogue));
}

template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, Epilogue epilogue) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double sum = bias ? static_cast<double>(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(A[m * lda + k]) * static_cast<double>(W[n * K + k]);
      T& c = C[m * ldc + n];
      switch (epilogue) {
        case Epilogue::Store:
          c = static_cast<T>(sum);
          break;
        case Epilogue::Accumulate:
          c = static_cast<T>(static_cast<double>(c) + sum);
          break;
        case Epilogue::Gelu:
          c = static_cast<T>(unary_ref(Unary::Gelu, sum));
          break;
        case Epilogue::GeluTanh:
          c = static_cast<T>(unary_ref(Unary::GeluTanh, sum));
          break;
      }
    }
  }
}

#define VIT_INSTANTIATE(T)                                                                                           \
  template void linear_forward<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t,     \
                                  Epilogue, LinearPath);                                                             \
  template void linear_forward_ref<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t, \
                                      Epilogue);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
