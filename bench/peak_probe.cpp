// The FMA peak probe (see peak_probe.h) and its benchmark.
#include "peak_probe.h"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace vit::bench {
namespace {

// 12 independent accumulators (Zen 3 / Skylake: 2 FMA pipes x 4-5 cycles latency = 8-10 in
// flight), `iters` rounds; returns the sum so the work cannot be dropped. 12 x 8 x 2 flops/round.
__attribute__((target("avx2,fma"), noipa)) float fma_loop(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[7];
}

constexpr double kFlopsPerRound = 12.0 * 8.0 * 2.0;

// The same with 512-bit FMAs (AVX-512 F): 12 x 16 x 2 flops/round.
__attribute__((target("avx512f"), noipa)) float fma512_loop(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

constexpr double kFlopsPerRound512 = 12.0 * 16.0 * 2.0;

template <typename Loop>
double best_gflops(Loop loop, double flops_per_round) {
  const int64_t iters = 1'000'000;  // ~0.01 s per try at 100 GFLOP/s
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int trial = 0; trial < 5; ++trial) {  // best of several: the probe wants the clean run
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + loop(iters);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops_per_round * static_cast<double>(iters) / s * 1e-9);
  }
  return best;
}

}  // namespace

double fma_peak_gflops() { return best_gflops(fma_loop, kFlopsPerRound); }

double fma512_peak_gflops() {
  return __builtin_cpu_supports("avx512f") ? best_gflops(fma512_loop, kFlopsPerRound512) : 0.0;
}

double active_fma_peak_gflops() {
  return kernels::isa_enabled(kernels::Isa::Avx512) ? fma512_peak_gflops() : fma_peak_gflops();
}

namespace {

void fma_peak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(fma_loop(100'000));
  state.counters["GFLOP/s"] =
      benchmark::Counter(kFlopsPerRound * 100'000, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(fma_peak)->Unit(benchmark::kMicrosecond);

void fma512_peak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512 F on this CPU");
  for (auto _ : state) benchmark::DoNotOptimize(fma512_loop(100'000));
  state.counters["GFLOP/s"] =
      benchmark::Counter(kFlopsPerRound512 * 100'000, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(fma512_peak)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vit::bench
