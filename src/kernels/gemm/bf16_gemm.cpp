// bfloat16 Linear layers (see bf16_gemm.h). The AVX512_BF16 micro-kernel computes an 8 x 48 tile:
// 24 zmm accumulators (8 rows x three 16-column panels), per K pair one broadcast of a row's two
// bf16 and one vdpbf16ps per accumulator (8 x 48 measured ~2% above 8 x 32 on Zen 5: ~89% of the
// vdpbf16ps peak on one thread). Threaded by the shared rule (gemm_driver.h): the rows of x are
// converted to bf16 pairs once per call, split between the threads; K runs in blocks whose partial
// sums wait in y, as the float32 driver does.
#include "kernels/gemm/bf16_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/isa_target.h"

namespace vit::kernels {

namespace {

// The bfloat16 rounding on a float32's bits, the result in the upper half (the lower half zero):
// to nearest, ties to even; a NaN made quiet, its sign kept. Branch-free, so loops of it vectorise.
inline uint32_t bf16_rounded_bits(uint32_t bits) {
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return (nan ? bits | 0x00400000u : rounded) & 0xFFFF0000u;
}

}  // namespace

uint16_t to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<uint16_t>(bf16_rounded_bits(bits) >> 16);
}

int64_t bf16_overflow_index(const float* values, int64_t n) {
  constexpr uint32_t kFirstToInf = 0x7F7F8000u;  // bfloat16 max 0x7F7F plus half a step: rounds up to 0x7F80
  constexpr uint32_t kInf = 0x7F800000u;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, values + i, sizeof(bits));
    const uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude >= kFirstToInf && magnitude < kInf) return i;
  }
  return -1;
}

float from_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

namespace {

constexpr int64_t kMr = 8;         // rows of a micro-tile
constexpr int64_t kNp = 3;         // 16-column panels of a micro-tile
constexpr int64_t kTw = kNp * 16;  // its width
constexpr int64_t kKcPairs = 192;  // K pairs of a block: three panels are 192 x 48 pairs = 36 KiB (L1)
constexpr int64_t kMcRows = 200;   // rows of an A block (a multiple of kMr): ~200 x 128 pairs (L2)

uint32_t pair(float even, float odd) { return static_cast<uint32_t>(to_bf16(even)) | (uint32_t{to_bf16(odd)} << 16); }

// Rows [0, rows) x K pairs [p0, p1) of x as bf16 pairs, row-major with row stride p1 - p0; rows
// up to `padded` are zero. The odd K's partner is zero.
void convert_rows_plain(const float* x, int64_t lda, int64_t rows, int64_t padded, int64_t K, int64_t p0, int64_t p1,
                        uint32_t* out) {
  const int64_t width = p1 - p0;
  for (int64_t r = 0; r < padded; ++r) {
    for (int64_t kk = p0; kk < p1; ++kk) {
      const int64_t k = 2 * kk;
      out[r * width + kk - p0] = r < rows ? pair(x[r * lda + k], k + 1 < K ? x[r * lda + k + 1] : 0.0f) : 0u;
    }
  }
}

// (GCC 12 warns about the undefined vector inside its own shift and narrowing intrinsics.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// One row of K floats as (K + 1) / 2 bf16 pairs, 16 floats at a time with to_bf16's exact rule
// (round to nearest even on the bits, a NaN made quiet, denormals kept), for the weights
// (Bf16Matrix::at reads them back).
VIT_TARGET_AVX512 void convert_row_exact_avx512(const float* row, int64_t K, uint32_t* out) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7FFF), quiet = _mm512_set1_epi32(0x40);
  const int64_t pairs = (K + 1) / 2;
  for (int64_t k = 0; k < 2 * pairs; k += 16) {
    const int64_t n = std::min<int64_t>(K - k, 16);  // floats read; the rest are zero
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(mask, row + k);
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, bias), lsb), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    h = _mm512_mask_or_epi32(h, nan, _mm512_srli_epi32(bits, 16), quiet);
    const __m256i halves = _mm512_cvtepi32_epi16(h);  // 16 bf16 in order: 8 pairs
    const int64_t pairs_here = std::min<int64_t>(8, pairs - k / 2);
    _mm256_mask_storeu_epi16(out + k / 2, static_cast<__mmask16>((1u << (2 * pairs_here)) - 1u), halves);
  }
}
#pragma GCC diagnostic pop

// The same with VCVTNE2PS2BF16 (32 floats to 16 pairs, round to nearest even, NaN made quiet as
// to_bf16 does). It reads denormal floats as zero where to_bf16 keeps them, but vdpbf16ps reads
// denormal bf16 inputs as zero too, so the products are the same.
VIT_TARGET_BF16 void convert_rows_avx512(const float* x, int64_t lda, int64_t rows, int64_t padded, int64_t K,
                                         int64_t p0, int64_t p1, uint32_t* out) {
  const int64_t width = p1 - p0, k_end = std::min(K, 2 * p1);
  for (int64_t r = 0; r < padded; ++r) {
    uint32_t* o = out + r * width;
    if (r >= rows) {
      std::memset(o, 0, static_cast<size_t>(width) * sizeof(uint32_t));
      continue;
    }
    const float* row = x + r * lda;
    for (int64_t k = 2 * p0; k < 2 * p1; k += 32) {
      const int64_t n = std::clamp<int64_t>(k_end - k, 0, 32);  // floats read; the rest are zero
      const __mmask16 lo = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
      const __mmask16 hi = static_cast<__mmask16>(n <= 16 ? 0u : n >= 32 ? 0xFFFFu : (1u << (n - 16)) - 1u);
      const __m512bh v =
          _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + k + 16), _mm512_maskz_loadu_ps(lo, row + k));
      const int64_t pairs_here = std::min<int64_t>(16, p1 - k / 2);
      _mm512_mask_storeu_epi32(o + (k / 2 - p0), static_cast<__mmask16>((1u << pairs_here) - 1u), (__m512i)v);
    }
  }
}

// Where a micro-kernel puts its sums: the tile buffer (8 x 48, for the store), or a whole tile of
// C: before the last K block C = sums or C += sums; in the last one, without an activation, the
// finished value (see finish()).
enum class Out { Tile, SetC, AddC, Final };

// The epilogue of the last K block. first: C holds the caller's values (the block is the only
// one): C = alpha acc + bias (+ beta C); else C holds the earlier blocks' sums: C = acc + C + bias.
struct Finish {
  bool first;
  float alpha, beta;
  const float* bias;  // at the tile's first column, or null
};

// acc (kMr x P*16) of 8 rows of bf16 pairs (row stride lda) by P panels (ps apart), kcp pairs.
template <int P>
VIT_TARGET_BF16 void micro_bf16(const uint32_t* __restrict a, int64_t lda, const uint32_t* __restrict b, int64_t ps,
                                int64_t kcp, float* __restrict tile, float* __restrict C, int64_t ldc, Out out,
                                const Finish* f) {
  __m512 c[kMr][P];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 3
    for (int p = 0; p < P; ++p) c[r][p] = _mm512_setzero_ps();
  }
#pragma GCC unroll 3
  for (int64_t kk = 0; kk < kcp; ++kk) {
    __m512bh w[P];
#pragma GCC unroll 3
    for (int p = 0; p < P; ++p) w[p] = (__m512bh)_mm512_loadu_si512(b + p * ps + kk * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const __m512bh v = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * lda + kk]));
#pragma GCC unroll 3
      for (int p = 0; p < P; ++p) c[r][p] = _mm512_dpbf16_ps(c[r][p], v, w[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 3
    for (int p = 0; p < P; ++p) {
      float* y = out == Out::Tile ? tile + r * kTw + p * 16 : C + r * ldc + p * 16;
      __m512 v = c[r][p];
      if (out == Out::AddC) v = _mm512_add_ps(v, _mm512_loadu_ps(y));
      if (out == Out::Final) {
        const __m512 bias = f->bias ? _mm512_loadu_ps(f->bias + p * 16) : _mm512_setzero_ps();
        if (f->first) {
          v = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(f->alpha), v), bias);
          if (f->beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(f->beta), _mm512_loadu_ps(y)));
        } else {
          v = _mm512_add_ps(_mm512_add_ps(v, _mm512_loadu_ps(y)), bias);
        }
      }
      _mm512_storeu_ps(y, v);
    }
  }
}

// The same in plain C++ (float32 accumulation of the bf16 products), into the tile only.
void micro_plain(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ps, int64_t panels, int64_t kcp,
                 float* tile) {
  for (int64_t i = 0; i < kMr * kTw; ++i) tile[i] = 0.0f;
  for (int64_t kk = 0; kk < kcp; ++kk) {
    for (int64_t r = 0; r < kMr; ++r) {
      const uint32_t av = a[r * lda + kk];
      const float a0 = from_bf16(static_cast<uint16_t>(av)), a1 = from_bf16(static_cast<uint16_t>(av >> 16));
      for (int64_t p = 0; p < panels; ++p) {
        for (int64_t j = 0; j < 16; ++j) {
          const uint32_t bv = b[p * ps + kk * 16 + j];
          tile[r * kTw + p * 16 + j] +=
              a0 * from_bf16(static_cast<uint16_t>(bv)) + a1 * from_bf16(static_cast<uint16_t>(bv >> 16));
        }
      }
    }
  }
}

// rows x cols of a tile into C: before the last block, C = t or C += t; in the last one the
// Finish and then the activation. One body, compiled plain and for AVX-512 (where GCC vectorises
// the activation's branch-free polynomial of kernels/vmath.h over the columns).
template <Activation A>
inline void store_body(const float* __restrict t, int64_t rows, int64_t cols, float* __restrict y, int64_t ldy, Out out,
                       const Finish& f) {
  // One plain loop per case (the cases hoisted out, so each vectorises).
  alignas(64) float bias[kTw] = {};
  if (f.bias) std::memcpy(bias, f.bias, static_cast<size_t>(cols) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict o = y + r * ldy;
    const float* __restrict v = t + r * kTw;
    if (out == Out::SetC) {
      for (int64_t j = 0; j < cols; ++j) o[j] = v[j];
    } else if (out == Out::AddC) {
      for (int64_t j = 0; j < cols; ++j) o[j] = v[j] + o[j];
    } else if (!f.first) {
      for (int64_t j = 0; j < cols; ++j) o[j] = activate<A>((v[j] + o[j]) + bias[j]);
    } else if (f.beta != 0.0f) {
      for (int64_t j = 0; j < cols; ++j) o[j] = activate<A>((f.alpha * v[j] + bias[j]) + f.beta * o[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) o[j] = activate<A>(f.alpha * v[j] + bias[j]);
    }
  }
}

using TileStore = void (*)(const float*, int64_t, int64_t, float*, int64_t, Out, const Finish&, Activation);

void store_plain(const float* t, int64_t rows, int64_t cols, float* y, int64_t ldy, Out out, const Finish& f,
                 Activation act) {
  with_activation(act, [&]<Activation A>() { store_body<A>(t, rows, cols, y, ldy, out, f); });
}
[[gnu::flatten]] VIT_TARGET_AVX512 void store_avx512(const float* t, int64_t rows, int64_t cols, float* y, int64_t ldy,
                                                     Out out, const Finish& f, Activation act) {
  with_activation(act, [&]<Activation A>() { store_body<A>(t, rows, cols, y, ldy, out, f); });
}

// The calling thread's buffer for the bf16 pairs of all rows of A (shared by its GEMM's threads).
uint32_t* a_scratch(size_t count) {
  thread_local std::vector<uint32_t> storage;
  if (storage.size() < count) storage.resize(count);
  return storage.data();
}

struct Problem {
  const uint32_t* a;  // the rows of x as bf16 pairs, row stride w->pairs(), padded to whole micro-tiles
  const Bf16Matrix* w;
  const float* bias;
  float* y;
  int64_t ldy;
  Epilogue e;
  bool native;
};

// Rows [m_begin, m_end) x panels [j_begin, j_end) of y.
void run_block(const Problem& p, int64_t m_begin, int64_t m_end, int64_t j_begin, int64_t j_end) {
  const Bf16Matrix& w = *p.w;
  const int64_t pairs = w.pairs(), N = w.rows(), ps = pairs * 16;
  // K blocks need the partial sums in C: alpha 1 and beta 0 or 1 (every Linear of a ViT); other
  // epilogues run K whole.
  const bool blocked = p.e.alpha == 1.0f && (p.e.beta == 0.0f || p.e.beta == 1.0f);
  const int64_t kcp_max = blocked ? kKcPairs : pairs;
  const TileStore store = p.native ? store_avx512 : store_plain;
  for (int64_t p0 = 0; p0 < pairs; p0 += kcp_max) {
    const int64_t p1 = std::min(pairs, p0 + kcp_max), kcp = p1 - p0;
    const bool first = p0 == 0, last = p1 == pairs;
    // Before the last block: the first one sets C (beta 0) or adds to it (beta 1, the residual).
    const Out partial = first && p.e.beta == 0.0f ? Out::SetC : Out::AddC;
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kMcRows) {
      const int64_t mc = std::min(kMcRows, m_end - m0), padded = (mc + kMr - 1) / kMr * kMr;
      for (int64_t j = j_begin, np = 0; j < j_end; j += np) {
        np = std::min(kNp, j_end - j);
        const uint32_t* bp = w.panel(j) + p0 * 16;
        const int64_t col = j * 16, cols = std::min(np * 16, N - col);
        // The next group's panels (this block's pairs of them), fetched while this one runs.
        const int64_t next_np = std::min(kNp, j_end - j - np), micro = padded / kMr;
        const char* next = next_np > 0 ? reinterpret_cast<const char*>(w.panel(j + np) + p0 * 16) : nullptr;
        const int64_t lines = kcp * 16 * 4 / 64, all = lines * next_np;
        const Finish f{first, p.e.alpha, p.e.beta, p.bias ? p.bias + col : nullptr};
        for (int64_t i = 0; i < micro; ++i) {
          if (next) {
            for (int64_t l = all * i / micro; l < all * (i + 1) / micro; ++l) {
              const int64_t panel = l >= 2 * lines ? 2 : l >= lines ? 1 : 0;  // (no division needed)
              _mm_prefetch(next + panel * ps * 4 + 64 * (l - panel * lines), _MM_HINT_T1);
            }
          }
          const int64_t rows = std::min(kMr, mc - i * kMr);
          const uint32_t* a = p.a + (m0 + i * kMr) * pairs + p0;
          float* c = p.y + (m0 + i * kMr) * p.ldy + col;
          const Out out = last ? Out::Final : partial;
          alignas(64) float tile[kMr * kTw];
          const bool whole = rows == kMr && cols == np * 16 && (!last || p.e.act == Activation::None);
          if (p.native && whole) {
            (np == 3   ? micro_bf16<3>
             : np == 2 ? micro_bf16<2>
                       : micro_bf16<1>)(a, pairs, bp, ps, kcp, tile, c, p.ldy, out, &f);
            continue;
          }
          if (p.native) {
            (np == 3   ? micro_bf16<3>
             : np == 2 ? micro_bf16<2>
                       : micro_bf16<1>)(a, pairs, bp, ps, kcp, tile, nullptr, 0, Out::Tile, nullptr);
          } else {
            micro_plain(a, pairs, bp, ps, np, kcp, tile);
          }
          store(tile, rows, cols, c, p.ldy, out, f, p.e.act);
        }
      }
    }
  }
}

// CPUs with AVX2 but not AVX512_BF16 (no bfloat16 arithmetic): the float32 GEMM on the same
// bfloat16 values. Rows of x rounded to bfloat16 and kept as float32 (the low 16 bits zero), the
// weight's pairs widened to float32 panel by panel as the float32 driver reaches them
// (PanelSource), float32 products summed with FMA in k order. The same inputs as AVX512_BF16's;
// the sums in another order (vdpbf16ps adds a pair's two products first).
template <typename Body>
[[gnu::flatten]] VIT_TARGET_AVX2 void avx2_loop(Body&& body) {
  body();
}

// x (rows, K; row stride lda) as bfloat16 values in float32, row stride K; to_bf16's rule.
void round_rows_avx2(const float* x, int64_t lda, int64_t rows, int64_t K, float* out) {
#pragma omp parallel for schedule(static) if (rows * K > (1 << 16) && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) {
    avx2_loop([&] {
      const uint32_t* in = reinterpret_cast<const uint32_t*>(x + r * lda);
      uint32_t* o = reinterpret_cast<uint32_t*>(out + r * K);
      for (int64_t k = 0; k < K; ++k) o[k] = bf16_rounded_bits(in[k]);
    });
  }
}

// PanelSource::fill for a Bf16Matrix: rows [k0, k0 + kc) of panel j as float32.
void widen_panel(const void* context, int64_t j, int64_t k0, int64_t kc, float* out) {
  const Bf16Matrix& w = *static_cast<const Bf16Matrix*>(context);
  const uint32_t* panel = w.panel(j) + (k0 / 2) * 16;
  avx2_loop([&] {
    uint32_t* o = reinterpret_cast<uint32_t*>(out);
    const int64_t whole = kc / 2;
    for (int64_t kk = 0; kk < whole; ++kk) {
      for (int64_t c = 0; c < 16; ++c) {
        const uint32_t v = panel[kk * 16 + c];
        o[(2 * kk) * 16 + c] = v << 16;
        o[(2 * kk + 1) * 16 + c] = v & 0xFFFF0000u;
      }
    }
    if (kc % 2) {
      for (int64_t c = 0; c < 16; ++c) o[(kc - 1) * 16 + c] = panel[whole * 16 + c] << 16;
    }
  });
}

void linear_bf16_avx2(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& w, const float* bias,
                      float* y, int64_t ldy, const Epilogue& epilogue) {
  thread_local std::vector<float> rounded;
  if (rounded.size() < static_cast<size_t>(M * K)) rounded.resize(static_cast<size_t>(M * K));
  round_rows_avx2(x, lda, M, K, rounded.data());
  const PanelSource source{widen_panel, &w};
  packed_gemm_sourced(rounded.data(), K, M, source, K, w.rows(), y, ldy, bias, epilogue);
}

}  // namespace

Bf16Matrix Bf16Matrix::from_weight(const float* weight, int64_t N, int64_t K) {
  VIT_CHECK(N >= 1 && K >= 1 && weight != nullptr, "bf16", "weight ({}, {}) cannot be packed", N, K);
  Bf16Matrix m;
  m.n_ = N;
  m.k_ = K;
  m.data_.assign(static_cast<size_t>(m.panels() * m.pairs() * 16), 0u);
  // Each row converted to pairs (vectorised where AVX-512 runs: the training GEMMs convert an
  // operand per call), then spread over its panel.
  const bool wide = isa_enabled(Isa::Avx512);
  std::vector<uint32_t> pairs(static_cast<size_t>(m.pairs()));
  for (int64_t n = 0; n < N; ++n) {
    if (wide) {
      convert_row_exact_avx512(weight + n * K, K, pairs.data());
    } else {
      convert_rows_plain(weight + n * K, K, 1, 1, K, 0, m.pairs(), pairs.data());
    }
    uint32_t* panel = m.data_.data() + (n / 16) * m.pairs() * 16 + n % 16;
    for (int64_t kk = 0; kk < m.pairs(); ++kk) panel[kk * 16] = pairs[static_cast<size_t>(kk)];
  }
  return m;
}

float Bf16Matrix::at(int64_t n, int64_t k) const {
  const uint32_t v = panel(n / 16)[(k / 2) * 16 + n % 16];
  return from_bf16(static_cast<uint16_t>(k % 2 == 0 ? v : v >> 16));
}

bool bf16_gemm_native() { return cpu_features().avx512bf16 && isa_enabled(Isa::Avx512); }

const char* bf16_gemm_path() {
  if (bf16_gemm_native()) return "AVX512_BF16";
  return packed_gemm_supported() ? "AVX2 float32" : "plain C++";
}

void linear_bf16(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& w, const float* bias, float* y,
                 int64_t ldy, const Epilogue& epilogue) {
  VIT_CHECK(K == w.cols(), "bf16", "input width {} but the weight takes {}", K, w.cols());
  VIT_CHECK(M >= 0 && lda >= K && ldy >= w.rows(), "bf16", "bad strides: M {}, lda {}, ldy {} for K {}, N {}", M, lda,
            ldy, K, w.rows());
  if (M == 0) return;
  if (!bf16_gemm_native() && packed_gemm_supported()) return linear_bf16_avx2(x, M, K, lda, w, bias, y, ldy, epilogue);
  // Each thread converts its share of the rows (padded to whole micro-tiles with zeros), then the
  // shared driver cuts y.
  const bool native = bf16_gemm_native();
  const int64_t pairs = w.pairs(), rows = (M + kMr - 1) / kMr * kMr;
  uint32_t* a = a_scratch(static_cast<size_t>(rows * pairs));
  const Problem p{a, &w, bias, y, ldy, epilogue, native};
  run_gemm_grid(
      M, w.panels(), kMr, M * w.rows() * K,
      [&](int64_t t, int64_t T) {
        const int64_t r0 = rows * t / T, r1 = rows * (t + 1) / T;
        if (r0 >= r1) return;
        const int64_t real = std::clamp<int64_t>(M - r0, 0, r1 - r0);
        (native ? convert_rows_avx512 : convert_rows_plain)(real > 0 ? x + r0 * lda : x, lda, real, r1 - r0, K, 0,
                                                            pairs, a + r0 * pairs);
      },
      [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) { run_block(p, m0, m1, j0, j1); });
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
