// gemm: float32 through our packed GEMM where the active ISA has AVX-512 (its 8 x 32 micro-kernel
// beats OpenBLAS's, which runs AVX2 kernels on CPUs it does not know, e.g. Zen 5), else through
// OpenBLAS's CBLAS (OpenMP build); double always through BLAS. And the reference triple loop.
#include "kernels/gemm/gemm.h"

#include <cblas.h>

#include <climits>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/packed_gemm.h"

namespace vit::kernels {

static void check_dims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  VIT_CHECK(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX &&
                ldb <= INT_MAX && ldc <= INT_MAX,
            "gemm", "sizes M={} N={} K={} (lda={} ldb={} ldc={}) out of BLAS range", M, N, K, lda, ldb, ldc);
}

// C = beta * C, the whole answer when alpha is 0 or K is 0: A and B are never read (NaN there is
// ignored) and beta 0 clears C (NaN there too). Done here, before any BLAS, because whether a BLAS
// skips the operands for alpha 0 depends on the kernel it picks for the CPU (OpenBLAS 0.3.21's
// Cooper Lake and Skylake-X kernels multiply them, its Haswell ones do not).
template <typename T>
static void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* row = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
  }
}

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_dims(M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (alpha == 0.0f || K == 0) return scale_c(M, N, beta, C, ldc);
  if (isa_enabled(Isa::Avx512)) {
    gemm_packed(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, nullptr, Epilogue{alpha, beta, Activation::None});
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  check_dims(M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (alpha == 0.0 || K == 0) return scale_c(M, N, beta, C, ldc);
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

template <typename T>
void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
              int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const T a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const T b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += static_cast<double>(a) * static_cast<double>(b);
      }
      const T prior = beta == T(0) ? T(0) : beta * C[i * ldc + j];  // beta 0 ignores NaN in C, as BLAS does
      C[i * ldc + j] = static_cast<T>(alpha * acc) + prior;
    }
  }
}

template void gemm_ref<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                              int64_t, float, float*, int64_t);
template void gemm_ref<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                               int64_t, double, double*, int64_t);

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace vit::kernels
