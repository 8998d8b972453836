// The packed float32 GEMM's micro-kernels and tile stores, one per ISA (see packed_micro.h).
#include "kernels/gemm/packed_micro.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "kernels/isa_target.h"
#include "kernels/vmath_avx2.h"

namespace vit::kernels::packed {
namespace {

// 16 columns of a tile (row stride `width`) into C. Whole rows of 16 through a local buffer, in
// plain loops the compiler vectorises at the width of the function it is inlined into (GELU
// included).
template <Init I, bool Last, Activation A>
inline void store_panel(const float* __restrict t, int64_t width, int64_t rows, int64_t cols, float* __restrict C,
                        int64_t ldc, float alpha, float beta, const float* __restrict bias) {
  alignas(64) float b[kNr] = {};
  if (Last && bias) std::memcpy(b, bias, static_cast<size_t>(cols) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    const float* v = t + r * width;
    alignas(64) float x[kNr] = {};
    if (I == Init::Overwrite || cols == kNr) {
      if constexpr (I == Init::Overwrite) {
        for (int64_t j = 0; j < kNr; ++j) x[j] = alpha * v[j];
      } else if constexpr (I == Init::Scale) {
        for (int64_t j = 0; j < kNr; ++j) x[j] = alpha * v[j] + beta * c[j];
      } else {
        for (int64_t j = 0; j < kNr; ++j) x[j] = alpha * v[j] + c[j];
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) x[j] = alpha * v[j] + (I == Init::Scale ? beta : 1.0f) * c[j];
    }
    if constexpr (Last) {
      for (int64_t j = 0; j < kNr; ++j) x[j] = activate<A>(x[j] + b[j]);
    }
    if (cols == kNr) {
      std::memcpy(c, x, sizeof(x));
    } else {
      std::memcpy(c, x, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

template <Init I, bool Last, Activation A>
inline void store_tile(const float* t, int64_t width, int64_t rows, int64_t cols, float* C, int64_t ldc,
                       const Tail& tail) {
  for (int64_t j = 0; j < cols; j += kNr) {
    store_panel<I, Last, A>(t + j, width, rows, std::min(kNr, cols - j), C + j, ldc, tail.alpha, tail.beta,
                            tail.bias ? tail.bias + j : nullptr);
  }
}

inline void store_generic(const float* t, int64_t width, int64_t rows, int64_t cols, float* C, int64_t ldc,
                          const Tail& tail) {
  auto go = [&]<Init I>() {
    if (!tail.last) return store_tile<I, false, Activation::None>(t, width, rows, cols, C, ldc, tail);
    with_activation(tail.act, [&]<Activation A>() { store_tile<I, true, A>(t, width, rows, cols, C, ldc, tail); });
  };
  switch (tail.init) {
    case Init::Overwrite:
      return go.template operator()<Init::Overwrite>();
    case Init::Scale:
      return go.template operator()<Init::Scale>();
    case Init::Add:
      return go.template operator()<Init::Add>();
  }
}

// The same store compiled for each ISA: flatten inlines the generic one (and the activation's
// vmath.h functions) into the target-specific body.
[[gnu::flatten]] void store_scalar(const float* t, int64_t width, int64_t rows, int64_t cols, float* C, int64_t ldc,
                                   const Tail& tail) {
  store_generic(t, width, rows, cols, C, ldc, tail);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void store_avx2(const float* t, int64_t width, int64_t rows, int64_t cols, float* C,
                                                 int64_t ldc, const Tail& tail) {
  store_generic(t, width, rows, cols, C, ldc, tail);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void store_avx512(const float* t, int64_t width, int64_t rows, int64_t cols,
                                                     float* C, int64_t ldc, const Tail& tail) {
  store_generic(t, width, rows, cols, C, ldc, tail);
}

// The plain one, for reading and for CPUs without AVX2 (std::fma: one rounding, as vfmadd).
constexpr int64_t kScalarMr = 6;
void micro_scalar(const Operands& o, int64_t kc, float* __restrict t, float*, int64_t, Out, const Tail*) {
  for (int64_t i = 0; i < kScalarMr * kNr; ++i) t[i] = 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    for (int64_t r = 0; r < kScalarMr; ++r) {
      const float a = o.a[r * o.a_row + k * o.a_k];
      for (int64_t j = 0; j < kNr; ++j) t[r * kNr + j] = std::fma(a, o.b[k * o.b_k + j], t[r * kNr + j]);
    }
  }
}

// AVX2: 12 accumulators in registers, per k two loads of B, six broadcasts of A (KMajor: A[k *
// as + r], a packed micro-panel or a stored A^T; else A[r * as + k], rows of A), twelve FMAs;
// whole tiles go to C as the AVX-512 kernel does (below).
constexpr int64_t kAvx2Mr = 6;
template <bool KMajor>
VIT_TARGET_AVX2 inline void micro_avx2(const float* __restrict Ap, int64_t as, const float* __restrict Bp, int64_t bk,
                                       int64_t kc, float* __restrict t, float* __restrict C, int64_t ldc, Out out,
                                       const Tail* tail) {
  __m256 c0[kAvx2Mr], c1[kAvx2Mr];
#pragma GCC unroll 6
  for (int r = 0; r < kAvx2Mr; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(Bp + k * bk), b1 = _mm256_loadu_ps(Bp + k * bk + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) {
      const __m256 a = _mm256_broadcast_ss(KMajor ? Ap + k * as + r : Ap + r * as + k);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
  }
  if (out == Out::Tile) {
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) {
      _mm256_store_ps(t + r * kNr, c0[r]);
      _mm256_store_ps(t + r * kNr + 8, c1[r]);
    }
    return;
  }
  const __m256 alpha = _mm256_set1_ps(out == Out::Final ? tail->alpha : 1.0f);
  const __m256 beta = _mm256_set1_ps(out == Out::Final ? tail->beta : 0.0f);
  const bool bias = out == Out::Final && tail->bias;
  const __m256 bias0 = bias ? _mm256_loadu_ps(tail->bias) : _mm256_setzero_ps();
  const __m256 bias1 = bias ? _mm256_loadu_ps(tail->bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < kAvx2Mr; ++r) {
    float* c = C + r * ldc;
    __m256 v0 = c0[r], v1 = c1[r];
    if (out == Out::AddC) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
    } else if (out == Out::Final) {  // the Tail in registers, in the store's order
      v0 = _mm256_mul_ps(alpha, v0);
      v1 = _mm256_mul_ps(alpha, v1);
      if (tail->init == Init::Scale) {
        v0 = _mm256_add_ps(v0, _mm256_mul_ps(beta, _mm256_loadu_ps(c)));
        v1 = _mm256_add_ps(v1, _mm256_mul_ps(beta, _mm256_loadu_ps(c + 8)));
      } else if (tail->init == Init::Add) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));
      }
      v0 = _mm256_add_ps(v0, bias0);
      v1 = _mm256_add_ps(v1, bias1);
      if (tail->act == Activation::Gelu) {
        v0 = gelu_avx2(v0);
        v1 = gelu_avx2(v1);
      } else if (tail->act == Activation::Relu) {
        v0 = _mm256_max_ps(v0, _mm256_setzero_ps());
        v1 = _mm256_max_ps(v1, _mm256_setzero_ps());
      }
    }
    _mm256_storeu_ps(c, v0);
    _mm256_storeu_ps(c + 8, v1);
  }
}

VIT_TARGET_AVX2 void micro_avx2_entry(const Operands& o, int64_t kc, float* t, float* C, int64_t ldc, Out out,
                                      const Tail* tail) {
  if (o.a_row == 1) return micro_avx2<true>(o.a, o.a_k, o.b, o.b_k, kc, t, C, ldc, out, tail);
  micro_avx2<false>(o.a, o.a_row, o.b, o.b_k, kc, t, C, ldc, out, tail);
}

// AVX-512: MR x (P * 16), MR * P zmm accumulators; per k, P loads of B (one per panel, bp floats
// apart, rows bk floats apart) and MR broadcasts of A: KMajor, A[k * as + r] (a packed
// micro-panel, or a stored A^T in place); else A[r * as + k] (MR rows of A in place).
template <int MR, int P, bool KMajor>
VIT_TARGET_AVX512 inline void micro_avx512(const float* __restrict Ap, int64_t as, const float* __restrict Bp,
                                           int64_t bp, int64_t bk, int64_t kc, float* __restrict t, float* __restrict C,
                                           int64_t ldc, Out out, const Tail* tail) {
  __m512 c[MR][P];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) c[r][p] = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) b[p] = _mm512_loadu_ps(Bp + p * bp + k * bk);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(KMajor ? Ap[k * as + r] : Ap[r * as + k]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) c[r][p] = _mm512_fmadd_ps(a, b[p], c[r][p]);
    }
  }
  if (out == Out::Tile) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) _mm512_store_ps(t + r * P * kNr + p * kNr, c[r][p]);
    }
    return;
  }
  if (out == Out::Final) {  // the last K block without an activation: the Tail in registers
    const __m512 alpha = _mm512_set1_ps(tail->alpha), beta = _mm512_set1_ps(tail->beta);
    __m512 bias[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) bias[p] = tail->bias ? _mm512_loadu_ps(tail->bias + p * kNr) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        float* c_rp = C + r * ldc + p * kNr;
        __m512 v = _mm512_mul_ps(alpha, c[r][p]);
        if (tail->init == Init::Scale) {
          v = _mm512_add_ps(v, _mm512_mul_ps(beta, _mm512_loadu_ps(c_rp)));
        } else if (tail->init == Init::Add) {
          v = _mm512_add_ps(v, _mm512_loadu_ps(c_rp));
        }
        _mm512_storeu_ps(c_rp, _mm512_add_ps(v, bias[p]));
      }
    }
    return;
  }
  // The sums of this K block into C (1 * sum + C: the store's rounding, so every entry agrees).
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      float* c_rp = C + r * ldc + p * kNr;
      _mm512_storeu_ps(c_rp, out == Out::AddC ? _mm512_add_ps(c[r][p], _mm512_loadu_ps(c_rp)) : c[r][p]);
    }
  }
}

template <int MR, int P>
VIT_TARGET_AVX512 void micro_avx512_entry(const Operands& o, int64_t kc, float* t, float* C, int64_t ldc, Out out,
                                          const Tail* tail) {
  if (o.a_row == 1) return micro_avx512<MR, P, true>(o.a, o.a_k, o.b, o.b_panel, o.b_k, kc, t, C, ldc, out, tail);
  micro_avx512<MR, P, false>(o.a, o.a_row, o.b, o.b_panel, o.b_k, kc, t, C, ldc, out, tail);
}

constexpr int64_t kAvx512Mr = 8;

static_assert(kAvx512Mr <= kMaxMr && kAvx2Mr <= kMaxMr && kScalarMr <= kMaxMr);

// The dispatch table, best first: the first entry the active ISA allows runs.
// Blocking: the AVX-512 entry keeps 256-deep K blocks (a B panel in L1) and reads A in place
// (measured on Zen 5 when A was packed: 3-8% slower). The AVX2 entry, measured on Zen 3 (ViT-B/16,
// one thread, medians of 4 interleaved rounds): 256 deep with A in place 633-671 ms; A packed
// 512 deep 520-581, 768 deep 506-540, 1024 deep 489-531. Rows of A read in place (six strided
// streams) and C re-read from L3 after every K block held the 6x16 kernel at 52-69% of the FMA peak
// on the wide GEMMs (qkv, fc1: N 2304, 3072); one contiguous micro-panel and at most 3 K blocks
// lift them to 75-87%. Narrow blocks (under 8 panels: the small models' training GEMMs) keep A
// in place, where packing would cost as much as it saves.
const MicroKernelEntry kMicroKernels[] = {
    {Isa::Avx512, "avx512 8x32", kAvx512Mr, 2, micro_avx512_entry<kAvx512Mr, 2>, micro_avx512_entry<kAvx512Mr, 1>,
     store_avx512, true, std::numeric_limits<int64_t>::max(), 256, false},
    {Isa::Avx2, "avx2 6x16", kAvx2Mr, 1, micro_avx2_entry, micro_avx2_entry, store_avx2, true, 8, 1024, true},
    {Isa::Scalar, "scalar 6x16", kScalarMr, 1, micro_scalar, micro_scalar, store_scalar, false,
     std::numeric_limits<int64_t>::max(), 256, false},
};

}  // namespace

const MicroKernelEntry& pick_micro_kernel() {
  for (const MicroKernelEntry& e : kMicroKernels) {
    if (isa_enabled(e.isa)) return e;
  }
  return kMicroKernels[std::size(kMicroKernels) - 1];
}

}  // namespace vit::kernels::packed
