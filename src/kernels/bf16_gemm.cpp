// bfloat16 Linear layers (see bf16_gemm.h). The AVX512_BF16 micro-kernel computes an 8 x 32 tile:
// 16 zmm accumulators (8 rows x two 16-column panels), per K pair one broadcast of a row's two bf16
// and one vdpbf16ps per accumulator. Cut and threaded by the shared driver (gemm_driver.h).
#include "kernels/bf16_gemm.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_driver.h"
#include "kernels/isa_target.h"

namespace vit::kernels {

uint16_t to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN, sign kept
  bits += 0x7FFF + ((bits >> 16) & 1);                                   // round to nearest, ties to even
  return static_cast<uint16_t>(bits >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

namespace {

constexpr int64_t kMr = 8;  // rows of a micro-tile

uint32_t pair(float even, float odd) { return static_cast<uint32_t>(to_bf16(even)) | (uint32_t{to_bf16(odd)} << 16); }

// Rows [0, rows) of x as bf16 pairs, pair-major: out[kk * kMr + r]; missing rows and the odd
// K's partner are zero.
void pack_rows(const float* x, int64_t lda, int64_t rows, int64_t K, uint32_t* out) {
  const int64_t pairs = (K + 1) / 2;
  for (int64_t kk = 0; kk < pairs; ++kk) {
    for (int64_t r = 0; r < kMr; ++r) {
      if (r >= rows) {
        out[kk * kMr + r] = 0;
        continue;
      }
      const float* row = x + r * lda;
      const int64_t k = 2 * kk;
      out[kk * kMr + r] = pair(row[k], k + 1 < K ? row[k + 1] : 0.0f);
    }
  }
}

// acc (kMr x 32) = the packed rows @ the panels b0 (and b1: 16 more columns, or none).
template <bool Two>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void tile_avx512bf16(const uint32_t* a, const uint32_t* b0,
                                                                            const uint32_t* b1, int64_t pairs,
                                                                            float* acc) {
  __m512 c0[kMr], c1[kMr];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < pairs; ++kk) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(b0 + kk * 16);
    __m512bh w1;
    if constexpr (Two) w1 = (__m512bh)_mm512_loadu_si512(b1 + kk * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const __m512bh v = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[kk * kMr + r]));
      c0[r] = _mm512_dpbf16_ps(c0[r], v, w0);
      if constexpr (Two) c1[r] = _mm512_dpbf16_ps(c1[r], v, w1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
    _mm512_storeu_ps(acc + r * 32, c0[r]);
    if constexpr (Two) _mm512_storeu_ps(acc + r * 32 + 16, c1[r]);
  }
}

// The same in plain C++ (float32 accumulation of the bf16 products).
void tile_plain(const uint32_t* a, const uint32_t* b0, const uint32_t* b1, int64_t pairs, float* acc) {
  for (int64_t i = 0; i < kMr * 32; ++i) acc[i] = 0.0f;
  for (int64_t kk = 0; kk < pairs; ++kk) {
    for (int64_t r = 0; r < kMr; ++r) {
      const uint32_t av = a[kk * kMr + r];
      const float a0 = from_bf16(static_cast<uint16_t>(av)), a1 = from_bf16(static_cast<uint16_t>(av >> 16));
      for (int p = 0; p < 2; ++p) {
        const uint32_t* b = p == 0 ? b0 : b1;
        if (b == nullptr) continue;
        for (int64_t j = 0; j < 16; ++j) {
          const uint32_t bv = b[kk * 16 + j];
          acc[r * 32 + p * 16 + j] +=
              a0 * from_bf16(static_cast<uint16_t>(bv)) + a1 * from_bf16(static_cast<uint16_t>(bv >> 16));
        }
      }
    }
  }
}

// C = act(alpha * acc + beta * C + bias) on rows x cols of a tile: one body, compiled plain (store)
// and for AVX-512 (store_act_avx512, where GCC vectorises the activation's branch-free polynomial
// of kernels/vmath.h over the columns), after isa_target.h's pattern.
template <Activation A>
inline void store_body(const float* acc, int64_t rows, int64_t cols, const float* bias, float* y, int64_t ldy,
                       const Epilogue& e) {
  for (int64_t r = 0; r < rows; ++r) {
    float* out = y + r * ldy;
    for (int64_t j = 0; j < cols; ++j) {
      float v = e.alpha * acc[r * 32 + j];
      if (bias) v += bias[j];
      if (e.beta != 0.0f) v += e.beta * out[j];
      out[j] = activate<A>(v);
    }
  }
}

template <Activation A>
void store(const float* acc, int64_t rows, int64_t cols, const float* bias, float* y, int64_t ldy, const Epilogue& e) {
  store_body<A>(acc, rows, cols, bias, y, ldy, e);
}

template <Activation A>
[[gnu::flatten]] VIT_TARGET_AVX512 void store_act_avx512(const float* acc, int64_t rows, int64_t cols,
                                                         const float* bias, float* y, int64_t ldy, const Epilogue& e) {
  store_body<A>(acc, rows, cols, bias, y, ldy, e);
}

// The same store with AVX-512 for the epilogues without an activation (GELU goes the scalar way).
__attribute__((target("avx512f,avx512bw"))) void store_avx512(const float* acc, int64_t rows, int64_t cols,
                                                              const float* bias, float* y, int64_t ldy,
                                                              const Epilogue& e) {
  const __m512 alpha = _mm512_set1_ps(e.alpha), beta = _mm512_set1_ps(e.beta);
  for (int64_t half = 0; half * 16 < cols; ++half) {
    const int64_t n = std::min<int64_t>(16, cols - half * 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + half * 16) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      float* out = y + r * ldy + half * 16;
      __m512 v = _mm512_add_ps(_mm512_mul_ps(alpha, _mm512_loadu_ps(acc + r * 32 + half * 16)), b);
      if (e.beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(mask, out)));
      _mm512_mask_storeu_ps(out, mask, v);
    }
  }
}

}  // namespace

Bf16Matrix Bf16Matrix::from_weight(const float* weight, int64_t N, int64_t K) {
  VIT_CHECK(N >= 1 && K >= 1 && weight != nullptr, "bf16", "weight ({}, {}) cannot be packed", N, K);
  Bf16Matrix m;
  m.n_ = N;
  m.k_ = K;
  m.data_.assign(static_cast<size_t>(m.panels() * m.pairs() * 16), 0u);
  for (int64_t n = 0; n < N; ++n) {
    uint32_t* panel = m.data_.data() + (n / 16) * m.pairs() * 16;
    const float* row = weight + n * K;
    for (int64_t kk = 0; kk < m.pairs(); ++kk) {
      const int64_t k = 2 * kk;
      panel[kk * 16 + n % 16] = pair(row[k], k + 1 < K ? row[k + 1] : 0.0f);
    }
  }
  return m;
}

float Bf16Matrix::at(int64_t n, int64_t k) const {
  const uint32_t v = panel(n / 16)[(k / 2) * 16 + n % 16];
  return from_bf16(static_cast<uint16_t>(k % 2 == 0 ? v : v >> 16));
}

bool bf16_gemm_native() { return cpu_features().avx512bf16 && isa_enabled(Isa::Avx512); }

void linear_bf16(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& w, const float* bias, float* y,
                 int64_t ldy, const Epilogue& epilogue) {
  VIT_CHECK(K == w.cols(), "bf16", "input width {} but the weight takes {}", K, w.cols());
  VIT_CHECK(M >= 0 && lda >= K && ldy >= w.rows(), "bf16", "bad strides: M {}, lda {}, ldy {} for K {}, N {}", M, lda,
            ldy, K, w.rows());
  if (M == 0) return;
  const int64_t N = w.rows(), pairs = w.pairs(), panels = w.panels();
  const bool native = bf16_gemm_native();
  run_gemm_grid(
      M, panels, kMr, M * N * K, [](int64_t, int64_t) {},
      [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) {
        std::vector<uint32_t> a(static_cast<size_t>(pairs * kMr));
        std::vector<float> acc(static_cast<size_t>(kMr * 32));
        for (int64_t m = m0; m < m1; m += kMr) {
          const int64_t rows = std::min(kMr, m1 - m);
          pack_rows(x + m * lda, lda, rows, K, a.data());
          for (int64_t p = j0; p < j1; p += 2) {
            const bool two = p + 1 < j1;
            const uint32_t* b1 = two ? w.panel(p + 1) : nullptr;
            if (native) {
              if (two) {
                tile_avx512bf16<true>(a.data(), w.panel(p), b1, pairs, acc.data());
              } else {
                tile_avx512bf16<false>(a.data(), w.panel(p), nullptr, pairs, acc.data());
              }
            } else {
              tile_plain(a.data(), w.panel(p), b1, pairs, acc.data());
            }
            const int64_t col = p * 16, cols = std::min<int64_t>(two ? 32 : 16, N - col);
            if (native && epilogue.act == Activation::None) {
              store_avx512(acc.data(), rows, cols, bias ? bias + col : nullptr, y + m * ldy + col, ldy, epilogue);
            } else if (native) {
              with_activation(epilogue.act, [&]<Activation A>() {
                store_act_avx512<A>(acc.data(), rows, cols, bias ? bias + col : nullptr, y + m * ldy + col, ldy,
                                    epilogue);
              });
            } else {
              with_activation(epilogue.act, [&]<Activation A>() {
                store<A>(acc.data(), rows, cols, bias ? bias + col : nullptr, y + m * ldy + col, ldy, epilogue);
              });
            }
          }
        }
      });
}

void linear_bf16_ref(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& w, const float* bias,
                     float* y, int64_t ldy, const Epilogue& e) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < w.rows(); ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        acc += static_cast<double>(from_bf16(to_bf16(x[m * lda + k]))) * static_cast<double>(w.at(n, k));
      }
      double v = e.alpha * acc + (bias ? bias[n] : 0.0);
      if (e.beta != 0.0f) v += e.beta * static_cast<double>(y[m * ldy + n]);
      y[m * ldy + n] = static_cast<float>(activate_ref(e.act, v));
    }
  }
}

}  // namespace vit::kernels
