// The int8 micro-kernels and their table (see int8_micro_kernels.h).
#include "kernels/gemm/int8_micro_kernels.h"

#include <immintrin.h>

#include <cstring>

namespace vit::kernels::int8_detail {
namespace {

inline int32_t load_quad(const uint8_t* p) {
  int32_t q;
  std::memcpy(&q, p, 4);
  return q;
}

// AVX2, one panel (4 x 16): 8 accumulators. Wide: the signed-shift form of the header.
template <bool Wide>
__attribute__((target("avx2,fma"))) void avx2_kernel(const uint8_t* __restrict Ap, const int8_t* __restrict Bp, int64_t,
                                                     int64_t groups, int64_t, const int32_t* __restrict colsum,
                                                     int32_t* __restrict t) {
  constexpr int64_t kMr = 4;
  __m256i c0[kMr], c1[kMr];
  for (int r = 0; r < kMr; ++r) c0[r] = c1[r] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 2
  for (int64_t g = 0; g < groups; ++g) {
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(Bp + g * kNr * kGroup));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(Bp + g * kNr * kGroup + 32));
#pragma GCC unroll 4
    for (int r = 0; r < kMr; ++r) {
      const __m256i a = _mm256_set1_epi32(load_quad(Ap + (g * kMr + r) * kGroup));
      if constexpr (Wide) {
        const __m256i s = _mm256_xor_si256(a, flip);  // a - 128 as int8
        const __m256i u = _mm256_abs_epi8(s);         // |a - 128| as uint8 (128 stays 0x80 = 128)
        c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(b0, s)), ones));
        c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(b1, s)), ones));
      } else {
        c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
        c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
      }
    }
  }
  if constexpr (Wide) {  // + 128 x colsum: back from a - 128 to a
    const __m256i s0 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(colsum)), 7);
    const __m256i s1 = _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(colsum + 8)), 7);
    for (int r = 0; r < kMr; ++r) {
      c0[r] = _mm256_add_epi32(c0[r], s0);
      c1[r] = _mm256_add_epi32(c1[r], s1);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + r * kNr), c0[r]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(t + r * kNr + 8), c1[r]);
  }
}

// c += a . b by quads. Inline assembly: GCC 12 copies every accumulator of the intrinsic's
// arrays once per iteration (24 moves per 12 vpdpbusd, measured), the asm keeps them in place.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void dpbusd(__m512i& c, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
}

// AVX-512 VNNI, MR rows x P panels: MR x P accumulators.
template <int MR, int P>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_tile(const uint8_t* __restrict Ap,
                                                                      const int8_t* __restrict Bp, int64_t panel_bytes,
                                                                      int64_t groups, int32_t* __restrict t) {
  __m512i c[MR][P];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 3
    for (int p = 0; p < P; ++p) c[r][p] = _mm512_setzero_si512();
  }
  for (int64_t g = 0; g < groups; ++g) {
    __m512i b[P];
#pragma GCC unroll 3
    for (int p = 0; p < P; ++p) b[p] = _mm512_load_si512(Bp + p * panel_bytes + g * kNr * kGroup);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i a = _mm512_set1_epi32(load_quad(Ap + (g * MR + r) * kGroup));
#pragma GCC unroll 3
      for (int p = 0; p < P; ++p) dpbusd(c[r][p], a, b[p]);
    }
  }
#pragma GCC unroll 3
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) _mm512_store_si512(t + (p * MR + r) * kNr, c[r][p]);
  }
}

template <int MR, int P>
void vnni_kernel(const uint8_t* Ap, const int8_t* Bp, int64_t panel_bytes, int64_t groups, int64_t panels,
                 const int32_t*, int32_t* t) {
  if constexpr (P > 1) {
    if (panels < P) return vnni_kernel<MR, P - 1>(Ap, Bp, panel_bytes, groups, panels, nullptr, t);
  }
  vnni_tile<MR, P>(Ap, Bp, panel_bytes, groups, t);
}

// The table, best first: the first entry the active ISA allows, that takes the weights' range and
// the row count, runs. An AVX-512 (non-VNNI) or AMX kernel is one more line here.
constexpr MicroKernelEntry kMicroKernels[] = {
    {Isa::Avx512Vnni, true, 8, 3, 5, vnni_kernel<8, 3>},  // 8 x 48 from 5 rows on
    {Isa::Avx512Vnni, true, 4, 3, 1, vnni_kernel<4, 3>},  // 1 to 4 rows (a batch of one's head)
    {Isa::Avx2, false, 4, 1, 1, avx2_kernel<false>},
    {Isa::Avx2, true, 4, 1, 1, avx2_kernel<true>},
};

}  // namespace

const MicroKernelEntry* pick_micro_kernel(int32_t weight_max, int64_t M) {
  for (const MicroKernelEntry& e : kMicroKernels) {
    if (isa_enabled(e.isa) && (e.wide || weight_max <= kNarrowWeightMax) && M >= e.min_rows) return &e;
  }
  return nullptr;
}

}  // namespace vit::kernels::int8_detail
