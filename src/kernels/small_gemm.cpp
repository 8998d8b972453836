// The small-operand GEMM (see small_gemm.h).
#include "kernels/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/gemm.h"
#include "kernels/packed_gemm.h"

namespace vit::kernels {
namespace {

constexpr int64_t kRows = 6;   // register tile: 6 rows ...
constexpr int64_t kCols = 16;  // ... by two 8-float vectors

// C[i0 .. i0+R, j0 .. j0+w) = alpha * op(A)[i0 .. i0+R, :] @ Bp[:, j0 .. j0+16) + beta * C, w <= 16.
// Bp is k-major with row stride ldp and readable 16 columns past j0. op(A)'s element (i, k) lies
// at a[i * rs + k * ks].
template <int R>
__attribute__((target("avx2,fma"))) void tile(const float* a, int64_t rs, int64_t ks, const float* Bp, int64_t ldp,
                                              int64_t K, float alpha, float beta, float* C, int64_t ldc, int64_t w) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(Bp + k * ldp), b1 = _mm256_loadu_ps(Bp + k * ldp + 8);
    const float* ak = a + k * ks;
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(ak + r * rs);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    __m256 x0 = _mm256_mul_ps(va, c0[r]), x1 = _mm256_mul_ps(va, c1[r]);
    if (w == kCols) {
      if (beta != 0.0f) {
        x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x0);
        x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8), x1);
      }
      _mm256_storeu_ps(c, x0);
      _mm256_storeu_ps(c + 8, x1);
    } else {
      alignas(32) float x[kCols];
      _mm256_store_ps(x, x0);
      _mm256_store_ps(x + 8, x1);
      for (int64_t j = 0; j < w; ++j) c[j] = beta != 0.0f ? x[j] + beta * c[j] : x[j];
    }
  }
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float, float, float*, int64_t,
                        int64_t);
constexpr TileFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

void small_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  VIT_CHECK(M >= 0 && N >= 0 && K >= 0 && ldc >= N, "small_gemm", "invalid sizes M={} N={} K={} ldc={}", M, N, K, ldc);
  if (M == 0 || N == 0) return;
  if (!packed_gemm_supported()) return gemm<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // B as k-major rows readable 16 columns past every block start: in place when N is a multiple
  // of 16 and B is not transposed (a head's v or dO), else one zero-padded copy.
  const float* Bp = B;
  int64_t ldp = ldb;
  if (trans_b || N % kCols != 0) {
    thread_local std::vector<float> copy;
    ldp = (N + kCols - 1) / kCols * kCols;
    copy.assign(static_cast<size_t>(std::max<int64_t>(K, 1) * ldp), 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      float* row = copy.data() + k * ldp;
      if (trans_b) {
        for (int64_t j = 0; j < N; ++j) row[j] = B[j * ldb + k];
      } else {
        std::copy(B + k * ldb, B + k * ldb + N, row);
      }
    }
    Bp = copy.data();
  }
  const int64_t rs = trans_a ? 1 : lda, ks = trans_a ? lda : 1;
  for (int64_t j0 = 0; j0 < N; j0 += kCols) {
    const int64_t w = std::min(kCols, N - j0);
    for (int64_t i0 = 0; i0 < M; i0 += kRows) {
      const int64_t rows = std::min(kRows, M - i0);
      kTiles[rows](A + i0 * rs, rs, ks, Bp + j0, ldp, K, alpha, beta, C + i0 * ldc + j0, ldc, w);
    }
  }
}

}  // namespace vit::kernels
