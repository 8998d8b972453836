// The FMA peak probe (see peak_probe.h) and its benchmark.
#include "peak_probe.h"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

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

}  // namespace

double fma_peak_gflops() {
  const int64_t iters = 1'000'000;  // ~0.01 s per try at 100 GFLOP/s
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int trial = 0; trial < 5; ++trial) {  // best of several: the probe wants the clean run
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + fma_loop(iters);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, kFlopsPerRound * static_cast<double>(iters) / s * 1e-9);
  }
  return best;
}

namespace {

void fma_peak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(fma_loop(100'000));
  state.counters["GFLOP/s"] =
      benchmark::Counter(kFlopsPerRound * 100'000, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(fma_peak)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vit::bench
