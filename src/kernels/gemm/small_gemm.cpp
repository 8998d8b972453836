// The small-operand GEMM (see small_gemm.h): an AVX-512 and an AVX2 register tile, each compiled
// with its own target attributes and picked from the active ISA at each call.
#include "kernels/gemm/small_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm.h"
#include "kernels/isa_target.h"

namespace vit::kernels {

// dst[k * ldd + j] = src[j * lds + k] for j < rows, k < cols (both <= 16), in registers: 16 rows
// (past `rows`: zeros) through four stages of shuffles. dst's 16 columns are all written.
VIT_TARGET_AVX512 void transpose16_avx512(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                                          int64_t ldd) {
  // (The maskz_ forms with every lane set: GCC 12's plain ones start from an "undefined" vector
  // that -Wuninitialized flags.)
  constexpr __mmask16 kAll = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  const __mmask16 m = static_cast<__mmask16>((1u << cols) - 1u);
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + i * lds) : _mm512_setzero_ps();
  // Pairs of rows interleaved by element, then by element pair: t[4g + c] holds, in 128-bit lane
  // L, column 4L + c of rows 4g .. 4g+3.
  for (int i = 0; i < 16; i += 2) {
    const __m512 lo = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]),
                 hi = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
    r[i] = lo;
    r[i + 1] = hi;
  }
  for (int g = 0; g < 16; g += 4) {
    const __m512d a = _mm512_castps_pd(r[g]), b = _mm512_castps_pd(r[g + 1]);
    const __m512d c = _mm512_castps_pd(r[g + 2]), d = _mm512_castps_pd(r[g + 3]);
    t[g] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, a, c));
    t[g + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, a, c));
    t[g + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, b, d));
    t[g + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, b, d));
  }
  // Lanes gathered across the four row groups: column 4L + c = lane L of t[c], t[4+c], t[8+c], t[12+c].
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_maskz_shuffle_f32x4(kAll, t[c], t[4 + c], 0x88),
                 w0 = _mm512_maskz_shuffle_f32x4(kAll, t[c], t[4 + c], 0xDD);
    const __m512 v1 = _mm512_maskz_shuffle_f32x4(kAll, t[8 + c], t[12 + c], 0x88);
    const __m512 w1 = _mm512_maskz_shuffle_f32x4(kAll, t[8 + c], t[12 + c], 0xDD);
    r[c] = _mm512_maskz_shuffle_f32x4(kAll, v0, v1, 0x88);       // lane 0
    r[8 + c] = _mm512_maskz_shuffle_f32x4(kAll, v0, v1, 0xDD);   // lane 2
    r[4 + c] = _mm512_maskz_shuffle_f32x4(kAll, w0, w1, 0x88);   // lane 1
    r[12 + c] = _mm512_maskz_shuffle_f32x4(kAll, w0, w1, 0xDD);  // lane 3
  }
  for (int k = 0; k < cols; ++k) _mm512_storeu_ps(dst + k * ldd, r[k]);
}

namespace {

// ---- AVX2 + FMA: 6 rows x 16 columns (two 8-float vectors), B padded to 16 columns ----

constexpr int64_t kRows = 6;   // register tile: 6 rows ...
constexpr int64_t kCols = 16;  // ... by two 8-float vectors

// C[i0 .. i0+R, j0 .. j0+w) = alpha * op(A)[i0 .. i0+R, :] @ Bp[:, j0 .. j0+16) + beta * C, w <= 16.
// Bp is k-major with row stride ldp and readable 16 columns past j0. op(A)'s element (i, k) lies
// at a[i * rs + k * ks].
template <int R>
VIT_TARGET_AVX2 void tile(const float* a, int64_t rs, int64_t ks, const float* Bp, int64_t ldp, int64_t K, float alpha,
                          float beta, float* C, int64_t ldc, int64_t w) {
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

void small_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
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

// ---- AVX-512: 8 rows x 32 columns (two 16-float vectors), the last vector masked ----

constexpr int64_t kRows512 = 8;
constexpr int64_t kCols512 = 32;

// C[i0 .. i0+R, j0 .. j0+16(V-1)+|last|) = alpha * op(A)[i0 .. i0+R, :] @ B[:, those columns] + beta * C,
// B k-major with row stride ldb (read only inside the columns: the last vector is masked, so B needs
// no padding). op(A)'s element (i, k) lies at a[i * rs + k * ks].
template <int R, int V>
VIT_TARGET_AVX512 void tile512(const float* a, int64_t rs, int64_t ks, const float* B, int64_t ldb, int64_t K,
                               float alpha, float beta, float* C, int64_t ldc, __mmask16 last) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[V];
    const float* bk = B + k * ldb;
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v)
      b[v] = v + 1 < V ? _mm512_loadu_ps(bk + 16 * v) : _mm512_maskz_loadu_ps(last, bk + 16 * v);
    const float* ak = a + k * ks;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(ak[r * rs]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, b[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v + 1 < V ? __mmask16(0xFFFF) : last;
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c + 16 * v), x);
      _mm512_mask_storeu_ps(c + 16 * v, m, x);
    }
  }
}

using Tile512Fn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float, float, float*,
                           int64_t, __mmask16);
// [vectors - 1][rows]
constexpr Tile512Fn kTiles512[2][kRows512 + 1] = {{nullptr, tile512<1, 1>, tile512<2, 1>, tile512<3, 1>, tile512<4, 1>,
                                                   tile512<5, 1>, tile512<6, 1>, tile512<7, 1>, tile512<8, 1>},
                                                  {nullptr, tile512<1, 2>, tile512<2, 2>, tile512<3, 2>, tile512<4, 2>,
                                                   tile512<5, 2>, tile512<6, 2>, tile512<7, 2>, tile512<8, 2>}};

void small_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                       int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // B k-major: in place unless transposed (a head's k or v in q k^T, dO v^T): then one copy.
  const float* Bp = B;
  int64_t ldp = ldb;
  if (trans_b) {
    thread_local std::vector<float> copy;
    ldp = (N + 15) / 16 * 16;
    if (copy.size() < static_cast<size_t>(K * ldp)) copy.resize(static_cast<size_t>(K * ldp));
    for (int64_t j0 = 0; j0 < N; j0 += 16) {
      for (int64_t k0 = 0; k0 < K; k0 += 16) {
        transpose16_avx512(B + j0 * ldb + k0, ldb, std::min<int64_t>(16, N - j0), std::min<int64_t>(16, K - k0),
                           copy.data() + k0 * ldp + j0, ldp);
      }
    }
    Bp = copy.data();
  }
  const int64_t rs = trans_a ? 1 : lda, ks = trans_a ? lda : 1;
  for (int64_t j0 = 0; j0 < N; j0 += kCols512) {
    const int64_t w = std::min(kCols512, N - j0), vectors = (w + 15) / 16;
    const __mmask16 last = static_cast<__mmask16>((1u << (w - 16 * (vectors - 1))) - 1u);
    for (int64_t i0 = 0; i0 < M; i0 += kRows512) {
      const int64_t rows = std::min(kRows512, M - i0);
      kTiles512[vectors - 1][rows](A + i0 * rs, rs, ks, Bp + j0, ldp, K, alpha, beta, C + i0 * ldc + j0, ldc, last);
    }
  }
}

}  // namespace

void small_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  VIT_CHECK(M >= 0 && N >= 0 && K >= 0 && ldc >= N, "small_gemm", "invalid sizes M={} N={} K={} ldc={}", M, N, K, ldc);
  if (M == 0 || N == 0) return;
  if (alpha == 0.0f) K = 0;  // A and B are not read (NaN there is ignored, as BLAS does)
  if (isa_enabled(Isa::Avx512))
    return small_gemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (isa_enabled(Isa::Avx2)) return small_gemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  gemm<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace vit::kernels
