// The direct convolution's micro-kernels (see conv_micro.h). Every entry computes the same sums; a
// tile's edges (rows past the last position, columns past the last channel) are handled in
// registers: rows by not storing them (their pointers are the zero row), columns by masked loads and
// stores (the packed B is zero-padded to whole panels; dy and dw are not, and a masked load of them
// never touches memory past the last column).
#include "kernels/conv/conv_micro.h"

#include <immintrin.h>

#include <iterator>

#include "kernels/isa_target.h"

namespace vit::kernels::conv {
namespace {

// ---- plain C++ ----

constexpr int64_t kScalarMr = 4;

inline float relu_keep_nan(float v) { return v < 0.0f ? 0.0f : v; }  // NaN stays NaN, as torch.relu

void igemm_scalar(const IgemmArgs& g) {
  float acc[kScalarMr][kPanel] = {};
  for (int64_t t = 0; t < g.taps; ++t) {
    const float* b = g.b[t];
    for (int64_t r = 0; r < g.rows; ++r) {
      const float* a = g.a[t * kScalarMr + r];
      for (int64_t k = 0; k < g.k; ++k) {
        const float av = a[k];
        for (int64_t n = 0; n < kPanel; ++n) acc[r][n] += av * b[k * kPanel + n];
      }
    }
  }
  for (int64_t r = 0; r < g.rows; ++r) {
    float* o = g.out + r * g.ldo;
    for (int64_t n = 0; n < g.cols; ++n) {
      float v = acc[r][n] + (g.bias ? g.bias[n] : 0.0f);
      if (g.accumulate) v += o[n];
      o[n] = g.relu ? relu_keep_nan(v) : v;
    }
  }
}

void wgrad_scalar(const WgradArgs& g) {
  float acc[kScalarMr][kPanel] = {};
  for (int64_t p = 0; p < g.positions; ++p) {
    const float* a = g.a[p] + g.a_offset;
    const float* d = g.dy + p * g.ldy;
    for (int64_t r = 0; r < g.rows; ++r) {
      for (int64_t n = 0; n < g.cols; ++n) acc[r][n] += a[r] * d[n];
    }
  }
  for (int64_t r = 0; r < g.rows; ++r) {
    for (int64_t n = 0; n < g.cols; ++n) g.dw[r * g.ldw + n] += acc[r][n];
  }
}

// ---- AVX2: 6 rows x one panel (two ymm) ----

constexpr int kAvx2Mr = 6;

VIT_TARGET_AVX2 inline __m256i lanes_below(int64_t n) {
  const int count = static_cast<int>(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// max(0, v): the second operand comes back when either is NaN, so NaN stays NaN.
VIT_TARGET_AVX2 inline __m256 relu8(__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }

VIT_TARGET_AVX2 void igemm_avx2(const IgemmArgs& g) {
  __m256 c0[kAvx2Mr], c1[kAvx2Mr];
#pragma GCC unroll 6
  for (int r = 0; r < kAvx2Mr; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t t = 0; t < g.taps; ++t) {
    const float* ap[kAvx2Mr];
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) ap[r] = g.a[t * kAvx2Mr + r];
    const float* __restrict b = g.b[t];
#pragma GCC unroll 4
    for (int64_t k = 0; k < g.k; ++k) {
      const __m256 b0 = _mm256_loadu_ps(b + k * kPanel), b1 = _mm256_loadu_ps(b + k * kPanel + 8);
#pragma GCC unroll 6
      for (int r = 0; r < kAvx2Mr; ++r) {
        const __m256 av = _mm256_broadcast_ss(ap[r] + k);
        c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
      }
    }
  }
  const __m256i m0 = lanes_below(g.cols), m1 = lanes_below(g.cols - 8);
  const __m256 bias0 = g.bias ? _mm256_maskload_ps(g.bias, m0) : _mm256_setzero_ps();
  const __m256 bias1 = g.bias ? _mm256_maskload_ps(g.bias + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < kAvx2Mr; ++r) {
    if (r >= g.rows) break;
    float* o = g.out + r * g.ldo;
    __m256 v0 = _mm256_add_ps(c0[r], bias0), v1 = _mm256_add_ps(c1[r], bias1);
    if (g.accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_maskload_ps(o, m0));
      v1 = _mm256_add_ps(v1, _mm256_maskload_ps(o + 8, m1));
    }
    if (g.relu) {
      v0 = relu8(v0);
      v1 = relu8(v1);
    }
    _mm256_maskstore_ps(o, m0, v0);
    _mm256_maskstore_ps(o + 8, m1, v1);
  }
}

template <int R, bool Full>
VIT_TARGET_AVX2 void wgrad_avx2_rows(const WgradArgs& g) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  const __m256i m0 = lanes_below(g.cols), m1 = lanes_below(g.cols - 8);
#pragma GCC unroll 2
  for (int64_t p = 0; p < g.positions; ++p) {
    const float* __restrict a = g.a[p] + g.a_offset;
    const float* __restrict d = g.dy + p * g.ldy;
    const __m256 d0 = Full ? _mm256_loadu_ps(d) : _mm256_maskload_ps(d, m0);
    const __m256 d1 = Full ? _mm256_loadu_ps(d + 8) : _mm256_maskload_ps(d + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
      c0[r] = _mm256_fmadd_ps(av, d0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, d1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* w = g.dw + r * g.ldw;
    _mm256_maskstore_ps(w, m0, _mm256_add_ps(c0[r], _mm256_maskload_ps(w, m0)));
    _mm256_maskstore_ps(w + 8, m1, _mm256_add_ps(c1[r], _mm256_maskload_ps(w + 8, m1)));
  }
}

template <bool Full>
VIT_TARGET_AVX2 void wgrad_avx2_cols(const WgradArgs& g) {
  switch (g.rows) {
    case 1:
      return wgrad_avx2_rows<1, Full>(g);
    case 2:
      return wgrad_avx2_rows<2, Full>(g);
    case 3:
      return wgrad_avx2_rows<3, Full>(g);
    case 4:
      return wgrad_avx2_rows<4, Full>(g);
    case 5:
      return wgrad_avx2_rows<5, Full>(g);
    default:
      return wgrad_avx2_rows<6, Full>(g);
  }
}

VIT_TARGET_AVX2 void wgrad_avx2(const WgradArgs& g) {
  if (g.cols == kPanel) return wgrad_avx2_cols<true>(g);
  wgrad_avx2_cols<false>(g);
}

// ---- AVX-512: 8 rows x P panels (one zmm each) ----

constexpr int kAvx512Mr = 8;

VIT_TARGET_AVX512 inline __mmask16 mask_below(int64_t n) {
  return n <= 0 ? __mmask16(0) : n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
}

template <int P>
VIT_TARGET_AVX512 void igemm_avx512(const IgemmArgs& g) {
  __m512 c[kAvx512Mr][P];
#pragma GCC unroll 8
  for (int r = 0; r < kAvx512Mr; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) c[r][p] = _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < g.taps; ++t) {
    const float* ap[kAvx512Mr];
#pragma GCC unroll 8
    for (int r = 0; r < kAvx512Mr; ++r) ap[r] = g.a[t * kAvx512Mr + r];
    const float* __restrict b = g.b[t];
#pragma GCC unroll 2
    for (int64_t k = 0; k < g.k; ++k) {
      __m512 bv[P];
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) bv[p] = _mm512_loadu_ps(b + p * g.b_panel + k * kPanel);
#pragma GCC unroll 8
      for (int r = 0; r < kAvx512Mr; ++r) {
        const __m512 av = _mm512_set1_ps(ap[r][k]);
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) c[r][p] = _mm512_fmadd_ps(av, bv[p], c[r][p]);
      }
    }
  }
  __mmask16 m[P];
  __m512 bias[P];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) {
    m[p] = mask_below(g.cols - p * kPanel);
    bias[p] = g.bias ? _mm512_maskz_loadu_ps(m[p], g.bias + p * kPanel) : _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int r = 0; r < kAvx512Mr; ++r) {
    if (r >= g.rows) break;
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      float* o = g.out + r * g.ldo + p * kPanel;
      __m512 v = _mm512_add_ps(c[r][p], bias[p]);
      if (g.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m[p], o));
      // max(0, v), NaN kept (see relu8); the masked form: _mm512_max_ps reads an undefined source GCC 12 warns of
      if (g.relu) v = _mm512_maskz_max_ps(__mmask16(0xFFFF), _mm512_setzero_ps(), v);
      _mm512_mask_storeu_ps(o, m[p], v);
    }
  }
}

template <int R, int P>
VIT_TARGET_AVX512 void wgrad_avx512_rows(const WgradArgs& g) {
  __m512 c[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) c[r][p] = _mm512_setzero_ps();
  }
  __mmask16 m[P];
#pragma GCC unroll 2
  for (int p = 0; p < P; ++p) m[p] = mask_below(g.cols - p * kPanel);
#pragma GCC unroll 2
  for (int64_t q = 0; q < g.positions; ++q) {
    const float* __restrict a = g.a[q] + g.a_offset;
    const float* __restrict d = g.dy + q * g.ldy;
    __m512 dv[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) dv[p] = _mm512_maskz_loadu_ps(m[p], d + p * kPanel);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) c[r][p] = _mm512_fmadd_ps(av, dv[p], c[r][p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      float* w = g.dw + r * g.ldw + p * kPanel;
      _mm512_mask_storeu_ps(w, m[p], _mm512_add_ps(c[r][p], _mm512_maskz_loadu_ps(m[p], w)));
    }
  }
}

template <int P>
VIT_TARGET_AVX512 void wgrad_avx512(const WgradArgs& g) {
  switch (g.rows) {
    case 1:
      return wgrad_avx512_rows<1, P>(g);
    case 2:
      return wgrad_avx512_rows<2, P>(g);
    case 3:
      return wgrad_avx512_rows<3, P>(g);
    case 4:
      return wgrad_avx512_rows<4, P>(g);
    case 5:
      return wgrad_avx512_rows<5, P>(g);
    case 6:
      return wgrad_avx512_rows<6, P>(g);
    case 7:
      return wgrad_avx512_rows<7, P>(g);
    default:
      return wgrad_avx512_rows<8, P>(g);
  }
}

static_assert(kAvx512Mr <= kMaxMr && kAvx2Mr <= kMaxMr && kScalarMr <= kMaxMr);

// Best first: the first entry the active ISA allows runs.
const ConvMicroKernels kEntries[] = {
    {Isa::Avx512, "avx512 8x32", kAvx512Mr, 2, igemm_avx512<2>, igemm_avx512<1>, kAvx512Mr, 2, wgrad_avx512<2>,
     wgrad_avx512<1>},
    {Isa::Avx2, "avx2 6x16", kAvx2Mr, 1, igemm_avx2, igemm_avx2, kAvx2Mr, 1, wgrad_avx2, wgrad_avx2},
    {Isa::Scalar, "scalar 4x16", kScalarMr, 1, igemm_scalar, igemm_scalar, kScalarMr, 1, wgrad_scalar, wgrad_scalar},
};

}  // namespace

const ConvMicroKernels& pick_conv_micro() {
  for (const ConvMicroKernels& e : kEntries) {
    if (isa_enabled(e.isa)) return e;
  }
  return kEntries[std::size(kEntries) - 1];
}

}  // namespace vit::kernels::conv
