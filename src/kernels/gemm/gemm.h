// The one door to BLAS. Row-major C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C,
// where op(A) = A or A^T; lda/ldb/ldc are row strides in elements (so strided sub-matrices, e.g.
// one head's q inside a packed (N, 3D) qkv row, need no copy). gemm_ref is the readable
// triple loop the fast path is tested against.
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc);

template <typename T>
void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
              int64_t ldb, T beta, T* C, int64_t ldc);

// Threads BLAS may use outside our own OpenMP regions (inside them it runs single-threaded).
void set_blas_threads(int threads);

}  // namespace vit::kernels
