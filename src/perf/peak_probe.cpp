// The arithmetic peak probes (see peak_probe.h).
//
// Each loop keeps its accumulators in named variables and issues the instruction by inline asm on
// them: GCC keeps arrays of vectors passed through asm in memory (a load and a store around every
// instruction), and with intrinsics it inserted register moves past ~16 accumulators. Accumulator
// counts, measured on a Zen 5 EPYC (2 pipes each): vfmadd231ps saturates at 8 (zmm, latency 4),
// vpdpbusd at 12, vdpbf16ps at 16 (12 gave 0.93 of its peak, the 2x of the zmm FMA it reaches at
// 16): 20 for the zmm mixes leaves room for longer latencies on other CPUs (22 of 32 registers).
// AVX2 has 16 ymm registers: 12 accumulators for the FMA, 8 for the int8 triple (whose only
// dependency through the accumulator is a 1-cycle vpaddd).
#include "perf/peak_probe.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "kernels/cpu_features.h"

namespace vit::perf {
namespace {

using kernels::cpu_features;
using kernels::Isa;
using kernels::isa_enabled;

// Calls M(name) for each accumulator variable.
#define VIT_PEAK_ACC8(M) M(c0) M(c1) M(c2) M(c3) M(c4) M(c5) M(c6) M(c7)
#define VIT_PEAK_ACC12(M) VIT_PEAK_ACC8(M) M(c8) M(c9) M(c10) M(c11)
#define VIT_PEAK_ACC20(M) VIT_PEAK_ACC12(M) M(c12) M(c13) M(c14) M(c15) M(c16) M(c17) M(c18) M(c19)

// A zmm loop: 20 accumulators (initialised to `a`), `rounds` x 20 instructions `insn acc, a, b`.
#define VIT_PEAK_ZMM_LOOP(INSN)          \
  VIT_PEAK_ACC20(VIT_PEAK_DECLARE)       \
  for (int64_t r = 0; r < rounds; ++r) { \
    VIT_PEAK_ACC20(INSN)                 \
  }                                      \
  __m512 sum = _mm512_setzero_ps();      \
  VIT_PEAK_ACC20(VIT_PEAK_SUM)           \
  return _mm512_cvtss_f32(sum);

#define VIT_PEAK_DECLARE(c) __m512 c = a;
#define VIT_PEAK_SUM(c) sum = _mm512_add_ps(sum, c);
#define VIT_PEAK_FMA512(c) asm("vfmadd231ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
#define VIT_PEAK_BF16(c) asm("vdpbf16ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
#define VIT_PEAK_VNNI(c) asm("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));

constexpr int kZmmAccumulators = 20;

// acc = acc * a + b with a just below 1: bounded, never denormal.
__attribute__((target("avx512f"), noipa)) float fma512_loop(int64_t rounds) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  VIT_PEAK_ZMM_LOOP(VIT_PEAK_FMA512)
}

// acc += a0 b0 + a1 b1 per lane, bf16 pairs of 2^-10: 2^-19 a step, bounded by the round count.
__attribute__((target("avx512f,avx512bf16"), noipa)) float bf16_loop(int64_t rounds) {
  const __m512 a = _mm512_castsi512_ps(_mm512_set1_epi32(0x3a803a80)), b = a;
  VIT_PEAK_ZMM_LOOP(VIT_PEAK_BF16)
}

// acc += 4 uint8 x int8 products per lane (integers wrap; only the time counts).
__attribute__((target("avx512f,avx512vnni"), noipa)) float vnni_loop(int64_t rounds) {
  const __m512 a = _mm512_castsi512_ps(_mm512_set1_epi8(3)), b = a;
  VIT_PEAK_ZMM_LOOP(VIT_PEAK_VNNI)
}

#undef VIT_PEAK_DECLARE
#undef VIT_PEAK_SUM

// 12 ymm FMAs a round.
__attribute__((target("avx2,fma"), noipa)) float fma256_loop(int64_t rounds) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#define VIT_PEAK_DECLARE(c) __m256 c = a;
#define VIT_PEAK_STEP(c) asm("vfmadd231ps %2, %1, %0" : "+x"(c) : "x"(a), "x"(b));
#define VIT_PEAK_SUM(c) sum = _mm256_add_ps(sum, c);
  VIT_PEAK_ACC12(VIT_PEAK_DECLARE)
  for (int64_t r = 0; r < rounds; ++r) {
    VIT_PEAK_ACC12(VIT_PEAK_STEP)
  }
  __m256 sum = _mm256_setzero_ps();
  VIT_PEAK_ACC12(VIT_PEAK_SUM)
#undef VIT_PEAK_DECLARE
#undef VIT_PEAK_STEP
#undef VIT_PEAK_SUM
  return _mm256_cvtss_f32(sum);
}

// 8 int8 steps a round, as the AVX2 int8 kernel's: t = pairs of uint8 x int8 products summed to
// int16 (vpmaddubsw), t = pairs of those summed to int32 (vpmaddwd by ones), acc += t.
__attribute__((target("avx2"), noipa)) float int8_avx2_loop(int64_t rounds) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5), ones = _mm256_set1_epi16(1);
#define VIT_PEAK_DECLARE(c) __m256i c = ones;
#define VIT_PEAK_STEP(ACC)                                                                       \
  {                                                                                              \
    __m256i t;                                                                                   \
    asm("vpmaddubsw %[b], %[a], %[t]\n\tvpmaddwd %[ones], %[t], %[t]\n\tvpaddd %[t], %[c], %[c]" \
        : [c] "+x"(ACC), [t] "=&x"(t)                                                            \
        : [a] "x"(a), [b] "x"(b), [ones] "x"(ones));                                             \
  }
#define VIT_PEAK_SUM(c) sum = _mm256_add_epi32(sum, c);
  VIT_PEAK_ACC8(VIT_PEAK_DECLARE)
  for (int64_t r = 0; r < rounds; ++r) {
    VIT_PEAK_ACC8(VIT_PEAK_STEP)
  }
  __m256i sum = _mm256_setzero_si256();
  VIT_PEAK_ACC8(VIT_PEAK_SUM)
#undef VIT_PEAK_DECLARE
#undef VIT_PEAK_STEP
#undef VIT_PEAK_SUM
  return static_cast<float>(_mm256_cvtsi256_si32(sum));
}

struct Mix {
  float (*loop)(int64_t rounds);
  double ops_per_round;
};

Mix mix_of(Peak peak) {
  switch (peak) {
    case Peak::Fma256:
      return {fma256_loop, 12.0 * 8 * 2};
    case Peak::Fma512:
      return {fma512_loop, kZmmAccumulators * 16.0 * 2};
    case Peak::Bf16:
      return {bf16_loop, kZmmAccumulators * 16.0 * 2 * 2};
    case Peak::Vnni:
      return {vnni_loop, kZmmAccumulators * 16.0 * 4 * 2};
    case Peak::Int8Avx2:
      return {int8_avx2_loop, 8.0 * 32 * 2};
  }
  return {nullptr, 0.0};
}

// Trials of 100k rounds (0.25 - 0.5 ms on a 4 GHz core) until 10 ms have passed and at least 4
// ran; the best one is the rate: the peak wants the trial no interrupt or other process slowed.
double best_rate(const Mix& mix) {
  constexpr int64_t kRounds = 100'000;
  constexpr double kBudgetSeconds = 0.010;
  volatile float sink = 0.0f;
  double best = 0.0, spent = 0.0;
  for (int trial = 0; trial < 4 || spent < kBudgetSeconds; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    sink = sink + mix.loop(kRounds);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spent += seconds;
    if (seconds > 0) best = std::max(best, mix.ops_per_round * static_cast<double>(kRounds) / seconds * 1e-9);
  }
  return best;
}

}  // namespace

const char* peak_key(Peak peak) {
  switch (peak) {
    case Peak::Fma256:
      return "fma256";
    case Peak::Fma512:
      return "fma512";
    case Peak::Bf16:
      return "bf16";
    case Peak::Vnni:
      return "vnni";
    case Peak::Int8Avx2:
      return "int8_avx2";
  }
  return "?";
}

const char* peak_description(Peak peak) {
  switch (peak) {
    case Peak::Fma256:
      return "ymm FMA (AVX2)";
    case Peak::Fma512:
      return "zmm FMA (AVX-512 F)";
    case Peak::Bf16:
      return "vdpbf16ps (AVX512_BF16)";
    case Peak::Vnni:
      return "vpdpbusd (AVX512_VNNI)";
    case Peak::Int8Avx2:
      return "vpmaddubsw+vpmaddwd (AVX2 int8)";
  }
  return "?";
}

const char* peak_unit(Peak peak) { return peak == Peak::Vnni || peak == Peak::Int8Avx2 ? "GOP/s" : "GFLOP/s"; }

bool peak_available(Peak peak) {
  switch (peak) {
    case Peak::Fma256:
    case Peak::Int8Avx2:
      return isa_enabled(Isa::Avx2);
    case Peak::Fma512:
      return isa_enabled(Isa::Avx512);
    case Peak::Bf16:  // as kernels::bf16_gemm_native(): the bf16 kernel runs at the Avx512 level
      return isa_enabled(Isa::Avx512) && cpu_features().avx512bf16;
    case Peak::Vnni:
      return isa_enabled(Isa::Avx512Vnni);
  }
  return false;
}

double measure_peak(Peak peak) { return peak_available(peak) ? best_rate(mix_of(peak)) : 0.0; }

Peaks measure_peaks() {
  Peaks peaks;
  for (Peak p : kAllPeaks) peaks.per_thread[static_cast<size_t>(p)] = measure_peak(p);
  return peaks;
}

PrecisionPeak precision_peak(const std::string& precision) {
  PrecisionPeak p;
  VIT_CHECK(precision == "float32" || precision == "bf16" || precision == "int8", "bench",
            "no peak for precision '{}' (float32, bf16 or int8)", precision);
  const double ymm = measure_peak(Peak::Fma256), zmm = measure_peak(Peak::Fma512);
  p.fma = zmm > ymm ? Peak::Fma512 : Peak::Fma256;
  p.fma_per_thread = std::max(ymm, zmm);
  p.factor = precision == "float32" ? 1 : precision == "bf16" ? 2 : 4;
  p.per_thread = p.fma_per_thread * p.factor;
  if (p.per_thread <= 0) return p;
  if (precision == "bf16" && !peak_available(Peak::Bf16)) {
    p.ceiling = 0.5;
    p.note = "no vdpbf16ps (AVX512_BF16) here: bf16 runs on float32 FMAs";
  } else if (precision == "int8" && !peak_available(Peak::Vnni)) {
    const double triple = measure_peak(Peak::Int8Avx2);
    p.ceiling = std::min(1.0, triple / p.per_thread);
    p.note = triple > 0 ? "no vpdpbusd (AVX512_VNNI) here: int8 runs on vpmaddubsw + vpmaddwd + vpaddd"
                        : "no SIMD int8 dot product at this ISA level";
  }
  return p;
}

std::string Peaks::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (Peak p : kAllPeaks) {
    if ((*this)[p] > 0) j[peak_key(p)] = (*this)[p];
  }
  return j.dump();
}

}  // namespace vit::perf
