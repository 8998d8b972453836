// The int8 linear layer (see int8_gemm.h).
#include "kernels/gemm/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm_driver.h"
#include "kernels/gemm/int8_micro_kernels.h"
#include "kernels/isa_target.h"

namespace vit::kernels {
namespace {

using int8_detail::kGroup;
using int8_detail::kNr;
using int8_detail::MicroKernelEntry;
constexpr int64_t kBlockBytes = 192 << 10;  // an A block (rows x depth bytes) kept in L2
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The row's parameters from its extremes (the scheme's definition, shared by both paths).
RowQuantization row_parameters(float mn, float mx, bool finite) {
  if (!finite) return {kNaN, 0};
  mn = std::min(mn, 0.0f);
  mx = std::max(mx, 0.0f);
  float scale = (mx - mn) / 255.0f;
  if (!(scale >= FLT_MIN)) scale = 1.0f;
  if (!std::isfinite(scale)) return {kNaN, 0};  // a range beyond float (|x| near FLT_MAX)
  const float inv = 1.0f / scale;
  const float z = std::nearbyint(-mn * inv);
  return {scale, static_cast<int32_t>(std::clamp(z, 0.0f, 255.0f))};
}

inline uint8_t quantize_value(float x, float inv, int32_t zero_point) {
  const float r = std::nearbyint(x * inv);
  // r is within [-256, 256] for a finite row (|x| <= the row's range); clamp before converting.
  const float c = std::clamp(r + static_cast<float>(zero_point), 0.0f, 255.0f);
  return static_cast<uint8_t>(c);
}

// Quantizes row x (K floats) and writes byte k through put(k, byte) (plain path).
template <typename Put>
RowQuantization quantize_row_plain(const float* x, int64_t K, Put&& put) {
  float mn = 0.0f, mx = 0.0f;
  bool finite = true;
  for (int64_t k = 0; k < K; ++k) {
    finite = finite && std::isfinite(x[k]);
    mn = std::min(mn, x[k]);
    mx = std::max(mx, x[k]);
  }
  const RowQuantization rq = row_parameters(mn, mx, finite);
  const float inv = 1.0f / rq.scale;
  for (int64_t k = 0; k < K; ++k) put(k, finite ? quantize_value(x[k], inv, rq.zero_point) : uint8_t{0});
  return rq;
}

// The vector paths' shared steps. The row's range from `lanes` per-lane minima, maxima and NaN/Inf
// sums, the elements from `k` on taken one by one; a row holding NaN or Inf gets zero bytes.
RowQuantization finish_range(const float* lo, const float* hi, const float* bad, int lanes, const float* x, int64_t k,
                             int64_t K, int64_t stride, uint8_t* dst, bool& finite) {
  float mn = 0.0f, mx = 0.0f;
  finite = true;
  for (int i = 0; i < lanes; ++i) {
    mn = std::min(mn, lo[i]);
    mx = std::max(mx, hi[i]);
    finite = finite && bad[i] == 0.0f;
  }
  for (int64_t t = k; t < K; ++t) {
    finite = finite && std::isfinite(x[t]);
    mn = std::min(mn, x[t]);
    mx = std::max(mx, x[t]);
  }
  if (!finite) {
    for (int64_t t = 0; t < K; ++t) dst[(t / kGroup) * stride + t % kGroup] = 0;
  }
  return row_parameters(mn, mx, finite);
}

// The bytes of the elements from `k` on, one by one.
void quantize_tail(const float* x, int64_t k, int64_t K, const RowQuantization& rq, int64_t stride, uint8_t* dst) {
  const float inv = 1.0f / rq.scale;
  for (; k < K; ++k) dst[(k / kGroup) * stride + k % kGroup] = quantize_value(x[k], inv, rq.zero_point);
}

// The same, vectorised, into micro-panel layout (mr rows): byte k of the row at
// dst[(k / 4) * 4 mr + k % 4]. The range (min, max and a NaN/Inf check) in one pass, the bytes in
// a second; rounding to nearest even, then the clamp to [0, 255], as quantize_value.
__attribute__((target("avx2,fma"))) RowQuantization quantize_row_avx2(const float* x, int64_t K, int64_t mr,
                                                                      uint8_t* dst) {
  const int64_t stride = mr * kGroup;  // bytes from one group of the row to the next
  __m256 vmin = _mm256_setzero_ps(), vmax = _mm256_setzero_ps(), poison = _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    vmin = _mm256_min_ps(vmin, v);
    vmax = _mm256_max_ps(vmax, v);
    poison = _mm256_add_ps(poison, _mm256_mul_ps(v, zero));  // NaN once any element is NaN or Inf
  }
  alignas(32) float lo[8], hi[8], bad[8];
  _mm256_store_ps(lo, vmin);
  _mm256_store_ps(hi, vmax);
  _mm256_store_ps(bad, poison);
  bool finite = true;
  const RowQuantization rq = finish_range(lo, hi, bad, 8, x, k, K, stride, dst, finite);
  if (!finite) return rq;
  const __m256 inv = _mm256_set1_ps(1.0f / rq.scale);
  const __m256i zp = _mm256_set1_epi32(rq.zero_point);
  k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 r =
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(r), zp);
    const __m256i w = _mm256_packs_epi32(q, q);   // int16, per 128-bit lane: q0-3 q0-3 | q4-7 q4-7
    const __m256i b = _mm256_packus_epi16(w, w);  // uint8 saturated = the clamp to [0, 255]
    const int32_t g0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
    const int32_t g1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
    std::memcpy(dst + (k / kGroup) * stride, &g0, 4);
    std::memcpy(dst + (k / kGroup + 1) * stride, &g1, 4);
  }
  quantize_tail(x, k, K, rq, stride, dst);
  return rq;
}

// The same at 16 floats a step (AVX-512): the same range, the same bytes. (GCC 12 warns about the
// undefined vector inside its own intrinsics.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
VIT_TARGET_AVX512 RowQuantization quantize_row_avx512(const float* x, int64_t K, int64_t mr, uint8_t* dst) {
  const int64_t stride = mr * kGroup;
  __m512 vmin = _mm512_setzero_ps(), vmax = _mm512_setzero_ps(), poison = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    vmin = _mm512_min_ps(vmin, v);
    vmax = _mm512_max_ps(vmax, v);
    poison = _mm512_add_ps(poison, _mm512_mul_ps(v, zero));  // NaN once any element is NaN or Inf
  }
  alignas(64) float lo[16], hi[16], bad[16];
  _mm512_store_ps(lo, vmin);
  _mm512_store_ps(hi, vmax);
  _mm512_store_ps(bad, poison);
  bool finite = true;
  const RowQuantization rq = finish_range(lo, hi, bad, 16, x, k, K, stride, dst, finite);
  if (!finite) return rq;
  const __m512 inv = _mm512_set1_ps(1.0f / rq.scale);
  const __m512i zp = _mm512_set1_epi32(rq.zero_point), none = _mm512_setzero_si512();
  k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 r =
        _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + k), inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i q = _mm512_max_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(r), zp), none);
    alignas(16) int32_t g[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(g), _mm512_cvtusepi32_epi8(q));  // the clamp to 255
    for (int i = 0; i < 4; ++i) std::memcpy(dst + (k / kGroup + i) * stride, &g[i], 4);
  }
  quantize_tail(x, k, K, rq, stride, dst);
  return rq;
}
#pragma GCC diagnostic pop

// One body, compiled for AVX2 and for AVX-512 (the GELU's polynomial vectorises at that width).
template <bool Accumulate, Activation Act>
inline void store_body(const int32_t* __restrict t, int64_t rows, int64_t cols, const RowQuantization* rq,
                       const float* __restrict wscale, const int32_t* __restrict colsum, const float* bias, float* C,
                       int64_t ldc) {
  alignas(32) float b[kNr] = {};
  if (bias) std::memcpy(b, bias, static_cast<size_t>(cols) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const float sa = rq[r].scale;
    const int32_t z = rq[r].zero_point;
    alignas(32) float x[kNr];
    for (int64_t j = 0; j < kNr; ++j) {
      x[j] = static_cast<float>(t[r * kNr + j] - z * colsum[j]) * (sa * wscale[j]) + b[j];
    }
    for (int64_t j = 0; j < kNr; ++j) x[j] = activate<Act>(x[j]);
    float* c = C + r * ldc;
    if constexpr (Accumulate) {
      for (int64_t j = 0; j < cols; ++j) c[j] += x[j];
    } else if (cols == kNr) {
      std::memcpy(c, x, sizeof(x));  // a constant size: two stores, not a call
    } else {
      std::memcpy(c, x, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

template <bool Accumulate, Activation Act>
[[gnu::flatten]] VIT_TARGET_AVX2 void store_tile_avx2(const int32_t* t, int64_t rows, int64_t cols,
                                                      const RowQuantization* rq, const float* wscale,
                                                      const int32_t* colsum, const float* bias, float* C, int64_t ldc) {
  store_body<Accumulate, Act>(t, rows, cols, rq, wscale, colsum, bias, C, ldc);
}
template <bool Accumulate, Activation Act>
[[gnu::flatten]] VIT_TARGET_AVX512 void store_tile_avx512(const int32_t* t, int64_t rows, int64_t cols,
                                                          const RowQuantization* rq, const float* wscale,
                                                          const int32_t* colsum, const float* bias, float* C,
                                                          int64_t ldc) {
  store_body<Accumulate, Act>(t, rows, cols, rq, wscale, colsum, bias, C, ldc);
}

using StoreFn = void (*)(const int32_t*, int64_t, int64_t, const RowQuantization*, const float*, const int32_t*,
                         const float*, float*, int64_t);

StoreFn store_for(const Epilogue& e) {
  const bool wide = isa_enabled(Isa::Avx512);
  if (e.beta != 0.0f) return wide ? store_tile_avx512<true, Activation::None> : store_tile_avx2<true, Activation::None>;
  return with_activation(e.act, [wide]<Activation A>() -> StoreFn {
    return wide ? store_tile_avx512<false, A> : store_tile_avx2<false, A>;
  });
}

// Where a finished tile goes: through the epilogue into C, or raw into acc (int8_accumulators).
struct Sink {
  StoreFn store = nullptr;
  const float* bias = nullptr;
  float* C = nullptr;
  int64_t ldc = 0;
  int32_t* acc = nullptr;  // (M, N) raw accumulators instead
  int64_t N = 0;
};

// The A operand of one call: quantized rows in micro-panels, and each row's parameters.
struct Quantized {
  std::vector<uint8_t> bytes;  // ceil(M / 4) micro-panels x depth x 4
  std::vector<RowQuantization> rows;
};

Quantized& scratch() {
  thread_local Quantized q;
  return q;
}

// Row m into its micro-panel of mr rows.
void quantize_rows(const float* A, int64_t M, int64_t K, int64_t lda, int64_t depth, int64_t mr, Quantized& q,
                   int64_t m) {
  uint8_t* panel = q.bytes.data() + (m / mr) * depth * mr;
  uint8_t* dst = panel + (m % mr) * kGroup;
  if (m >= M) {  // padding rows of the last micro-panel
    for (int64_t g = 0; g < depth / kGroup; ++g) std::memset(dst + g * mr * kGroup, 0, kGroup);
    return;
  }
  for (int64_t k = K; k < depth; ++k) dst[(k / kGroup) * mr * kGroup + k % kGroup] = 0;
  q.rows[static_cast<size_t>(m)] = isa_enabled(Isa::Avx512) ? quantize_row_avx512(A + m * lda, K, mr, dst)
                                                            : quantize_row_avx2(A + m * lda, K, mr, dst);
}

// Rows [m_begin, m_end) (multiples of 4, but m_end may be M) x panels [j_begin, j_end).
void run_block(const Quantized& q, int64_t M, const Int8Matrix& W, int64_t m_begin, int64_t m_end, int64_t j_begin,
               int64_t j_end, const Sink& sink, const MicroKernelEntry& kernel) {
  const int64_t depth = W.depth(), groups = depth / kGroup, panel_bytes = depth * kNr;
  const int64_t mr = kernel.mr;
  const int64_t block_rows = std::max(mr, kBlockBytes / std::max<int64_t>(depth, 1) / mr * mr);
  const int64_t step = kernel.panels;  // panels per kernel call
  for (int64_t m0 = m_begin; m0 < m_end; m0 += block_rows) {
    const int64_t m1 = std::min(m_end, m0 + block_rows);
    for (int64_t j = j_begin; j < j_end; j += step) {
      const int64_t panels = std::min(step, j_end - j);
      const int8_t* bp = W.data() + j * panel_bytes;
      for (int64_t m = m0; m < m1; m += mr) {
        alignas(64) int32_t t[int8_detail::kMaxTile];
        const uint8_t* ap = q.bytes.data() + (m / mr) * depth * mr;
        kernel.kernel(ap, bp, panel_bytes, groups, panels, W.column_sums() + j * kNr, t);
        const int64_t rows = std::min(mr, M - m);
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t n0 = (j + p) * kNr, cols = std::min(kNr, W.cols() - n0);
          const int32_t* tile = t + p * mr * kNr;
          if (sink.acc) {
            for (int64_t r = 0; r < rows; ++r) {
              std::memcpy(sink.acc + (m + r) * sink.N + n0, tile + r * kNr,
                          static_cast<size_t>(cols) * sizeof(int32_t));
            }
          } else {
            sink.store(tile, rows, cols, q.rows.data() + m, W.scales() + n0, W.column_sums() + n0,
                       sink.bias ? sink.bias + n0 : nullptr, sink.C + m * sink.ldc + n0, sink.ldc);
          }
        }
      }
    }
  }
}

// The fast path: each thread quantizes its share of the rows, then the shared driver cuts C.
void run_simd(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, const Sink& sink,
              const MicroKernelEntry& kernel) {
  const int64_t depth = W.depth(), mr = kernel.mr, rows = (M + mr - 1) / mr * mr;
  Quantized& q = scratch();
  q.bytes.resize(static_cast<size_t>(std::max<int64_t>(1, rows * depth)));
  q.rows.resize(static_cast<size_t>(rows));
  run_gemm_grid(
      M, W.panels(), mr, M * W.cols() * K,
      [&](int64_t t, int64_t T) {
        for (int64_t m = rows * t / T; m < rows * (t + 1) / T; ++m) quantize_rows(A, M, K, lda, depth, mr, q, m);
      },
      [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) { run_block(q, M, W, m0, m1, j0, j1, sink, kernel); });
}

// The plain path: the same integers by loops, the epilogue in scalar code.
void run_reference(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, const Sink& sink,
                   const Epilogue& e, RowQuantization* rows_out) {
  const int64_t N = W.cols();
#pragma omp parallel for schedule(static) if (M * N * K >= kParallelFlops && !omp_in_parallel())
  for (int64_t m = 0; m < M; ++m) {
    std::vector<uint8_t> qa(static_cast<size_t>(K));
    const RowQuantization rq = quantize_row(A + m * lda, K, qa.data());
    if (rows_out) rows_out[m] = rq;
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<int32_t>(qa[static_cast<size_t>(k)]) * W.at(n, k);
      if (sink.acc) {
        sink.acc[m * N + n] = acc;
        continue;
      }
      const int32_t corrected = acc - rq.zero_point * W.column_sums()[n];
      float v = static_cast<float>(corrected) * (rq.scale * W.scales()[n]) + (sink.bias ? sink.bias[n] : 0.0f);
      float& c = sink.C[m * sink.ldc + n];
      if (e.beta != 0.0f) {
        c += v;
      } else {
        c = with_activation(e.act, [v]<Activation Act>() { return activate<Act>(v); });
      }
    }
  }
}

void check_operands(int64_t M, int64_t K, int64_t lda, const Int8Matrix& W) {
  VIT_CHECK(M >= 0 && K == W.rows() && lda >= K, "linear_int8",
            "int8 weight ({} x {}) for inputs of width {} (M={}, lda={})", W.cols(), W.rows(), K, M, lda);
}

}  // namespace

int32_t int8_weight_max(int bits) {
  VIT_CHECK(bits == 7 || bits == 8, "int8", "weights of {} bits: the int8 schemes have 7 or 8", bits);
  return bits == 7 ? kInt8WeightMax : kInt8WeightMax8;
}

int64_t quantize_weight(const float* W, int64_t N, int64_t K, int8_t* q, float* scale, int bits) {
  const int32_t wmax = int8_weight_max(bits);
  for (int64_t n = 0; n < N; ++n) {
    const float* w = W + n * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      if (!std::isfinite(w[k])) return n * K + k;
      amax = std::max(amax, std::fabs(w[k]));
    }
    float s = amax / static_cast<float>(wmax);
    if (!(s >= FLT_MIN)) s = 1.0f;  // a row of zeros (or of values too small to scale)
    scale[n] = s;
    for (int64_t k = 0; k < K; ++k) {
      const float r = std::nearbyint(w[k] / s);
      q[n * K + k] = static_cast<int8_t>(std::clamp(r, -static_cast<float>(wmax), static_cast<float>(wmax)));
    }
  }
  return -1;
}

RowQuantization quantize_row(const float* x, int64_t K, uint8_t* q) {
  return quantize_row_plain(x, K, [q](int64_t k, uint8_t v) { q[k] = v; });
}

Int8Matrix Int8Matrix::from_quantized(const int8_t* q, const float* scale, int64_t N, int64_t K, int bits) {
  const int32_t wmax = int8_weight_max(bits);
  VIT_CHECK(N >= 0 && K >= 0, "int8", "invalid weight shape ({}, {})", N, K);
  // 255 x 127 x K (and the compensation) must stay inside int32.
  VIT_CHECK(K <= (1 << 16), "int8", "input width {} is more than the int8 kernel's 65536", K);
  for (int64_t n = 0; n < N; ++n) {
    VIT_CHECK(std::isfinite(scale[n]) && scale[n] > 0.0f, "int8", "scale of channel {} is {} (must be finite and > 0)",
              n, scale[n]);
  }
  Int8Matrix m;
  m.k_ = K;
  m.n_ = N;
  m.kp_ = round_up(K, kGroup);
  const int64_t panels = m.panels();
  m.data_ = aligned_array<int8_t>(static_cast<size_t>(panels * m.kp_ * kNr), true);
  m.scale_ = aligned_array<float>(static_cast<size_t>(panels * kNr), true);
  m.colsum_ = aligned_array<int32_t>(static_cast<size_t>(panels * kNr), true);
  // The range check rides on the packing pass: each row notes its largest |q|, checked after.
  std::vector<int32_t> row_max(static_cast<size_t>(N), 0);
#pragma omp parallel for schedule(static) if (N * K > (1 << 16) && !omp_in_parallel())
  for (int64_t n = 0; n < N; ++n) {
    int8_t* panel = m.data_.get() + (n / kNr) * m.kp_ * kNr + (n % kNr) * kGroup;
    int32_t sum = 0, worst = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = q[n * K + k];
      panel[(k / kGroup) * kNr * kGroup + k % kGroup] = v;
      sum += v;
      worst = std::max(worst, std::abs(static_cast<int32_t>(v)));
    }
    row_max[static_cast<size_t>(n)] = worst;
    m.colsum_[n] = sum;
    m.scale_[n] = scale[n];
  }
  for (int64_t n = 0; n < N; ++n) {
    m.weight_max_ = std::max(m.weight_max_, row_max[static_cast<size_t>(n)]);
    if (row_max[static_cast<size_t>(n)] <= wmax) continue;
    int64_t k = 0;
    while (std::abs(static_cast<int32_t>(q[n * K + k])) <= wmax) ++k;
    fail("int8", "value {} at ({}, {}) is outside [-{}, {}] ({}-bit weights)", static_cast<int>(q[n * K + k]), n, k,
         wmax, wmax, bits);
  }
  return m;
}

int8_t Int8Matrix::at(int64_t n, int64_t k) const {
  return data_[(n / kNr) * kp_ * kNr + (k / kGroup) * kNr * kGroup + (n % kNr) * kGroup + k % kGroup];
}

size_t Int8Matrix::bytes() const {
  return static_cast<size_t>(panels() * kp_ * kNr) + static_cast<size_t>(panels() * kNr) * 8;
}

void linear_int8(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, const float* bias, float* C,
                 int64_t ldc, const Epilogue& epilogue) {
  check_operands(M, K, lda, W);
  VIT_CHECK(ldc >= W.cols(), "linear_int8", "ldc {} < {} outputs", ldc, W.cols());
  VIT_CHECK(
      epilogue.alpha == 1.0f && (epilogue.beta == 0.0f || (epilogue.beta == 1.0f && epilogue.act == Activation::None)),
      "linear_int8",
      "epilogue alpha {} beta {} act {}: the int8 kernel takes alpha 1, beta 0 or 1 (then no "
      "activation)",
      epilogue.alpha, epilogue.beta, activation_name(epilogue.act));
  if (M == 0 || W.cols() == 0) return;
  Sink sink;
  sink.store = store_for(epilogue);
  sink.bias = bias;
  sink.C = C;
  sink.ldc = ldc;
  const MicroKernelEntry* kernel = int8_detail::pick_micro_kernel(W.weight_max(), M);
  if (!kernel) return run_reference(A, M, K, lda, W, sink, epilogue, nullptr);
  run_simd(A, M, K, lda, W, sink, *kernel);
}

void int8_accumulators(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, int32_t* acc,
                       RowQuantization* rows) {
  check_operands(M, K, lda, W);
  if (M == 0) return;
  Sink sink;
  sink.acc = acc;
  sink.N = W.cols();
  const MicroKernelEntry* kernel = int8_detail::pick_micro_kernel(W.weight_max(), M);
  if (!kernel || W.cols() == 0) return run_reference(A, M, K, lda, W, sink, Epilogue::Store, rows);
  run_simd(A, M, K, lda, W, sink, *kernel);
  const Quantized& q = scratch();
  std::copy(q.rows.begin(), q.rows.begin() + M, rows);
}

}  // namespace vit::kernels
