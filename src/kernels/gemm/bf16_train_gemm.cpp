// bfloat16 GEMMs for mixed-precision training (see bf16_train_gemm.h).
#include "kernels/gemm/bf16_train_gemm.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::kernels {
namespace {

float rounded(float x) { return from_bf16(to_bf16(x)); }

// op(X) element (i, j) of a matrix stored with row stride ld: X[i][j], or X[j][i] when transposed.
inline float op_at(const float* X, int64_t ld, bool transposed, int64_t i, int64_t j) {
  return transposed ? X[j * ld + i] : X[i * ld + j];
}

// dst (cols, rows) = src (rows, cols; row stride ld)^T, in 16 x 16 tiles: a plain loop writing
// one column at a time strides by `rows` floats, and at 1024 rows (4 KB, the digits model's batch
// of tokens) every store of a column lands in one cache set (25x slower than the tiles, measured).
void transpose_into(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * ld + c];
      }
    }
  }
}

void check_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  VIT_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm_bf16", "negative size M {} N {} K {}", M, N, K);
  VIT_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N, "gemm_bf16",
            "strides lda {} ldb {} ldc {} too small for M {} N {} K {} (trans_a {}, trans_b {})", lda, ldb, ldc, M, N,
            K, trans_a, trans_b);
}

}  // namespace

void linear_forward_bf16(const float* x, int64_t M, int64_t K, int64_t lda, const float* W, int64_t N,
                         const float* bias, float* y, int64_t ldy) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: the bias alone
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) y[m * ldy + n] = bias ? bias[n] : 0.0f;
    }
    return;
  }
  linear_bf16(x, M, K, lda, Bf16Matrix::from_weight(W, N, K), bias, y, ldy, Epilogue::Store);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = beta * C (beta 0: C is not read)
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = beta == 0.0f ? 0.0f : beta * C[m * ldc + n];
    }
    return;
  }
  // op(B)^T (N, K): B's rows when B is stored (N, K) already, else its columns, copied.
  std::vector<float> weight;
  const float* w = B;
  if (!trans_b || ldb != K) {
    weight.resize(static_cast<size_t>(N * K));
    if (trans_b) {  // B (N, K) with a wider stride: its rows, packed together
      for (int64_t n = 0; n < N; ++n) std::copy(B + n * ldb, B + n * ldb + K, weight.begin() + n * K);
    } else {  // B (K, N)
      transpose_into(B, K, N, ldb, weight.data());
    }
    w = weight.data();
  }
  // op(A) (M, K): A itself (with its stride) unless transposed.
  std::vector<float> rows;
  const float* x = A;
  int64_t ldx = lda;
  if (trans_a) {
    rows.resize(static_cast<size_t>(M * K));
    transpose_into(A, K, M, lda, rows.data());  // A (K, M)
    x = rows.data();
    ldx = K;
  }
  linear_bf16(x, M, K, ldx, Bf16Matrix::from_weight(w, N, K), nullptr, C, ldc, Epilogue{alpha, beta, Activation::None});
}

void gemm_bf16_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        acc += static_cast<double>(rounded(op_at(A, lda, trans_a, m, k))) *
               static_cast<double>(rounded(op_at(B, ldb, trans_b, k, n)));
      }
      double v = static_cast<double>(alpha) * acc;
      if (beta != 0.0f) v += static_cast<double>(beta) * static_cast<double>(C[m * ldc + n]);
      C[m * ldc + n] = static_cast<float>(v);
    }
  }
}

}  // namespace vit::kernels
