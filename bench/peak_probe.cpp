// The peak probes (perf/peak_probe.h) as Google benchmarks, one per instruction mix (skipped where
// the CPU lacks it or the ISA is capped below it), and the FMA peaks the kernel benchmarks divide
// by (peak_probe.h).
#include "peak_probe.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "kernels/cpu_features.h"
#include "perf/peak_probe.h"

namespace vit::bench {

double fma_peak_gflops() { return perf::measure_peak(perf::Peak::Fma256); }

double fma512_peak_gflops() { return perf::measure_peak(perf::Peak::Fma512); }

double active_fma_peak_gflops() {
  return kernels::isa_enabled(kernels::Isa::Avx512) ? fma512_peak_gflops() : fma_peak_gflops();
}

namespace {

// One probe per iteration (its best trial); the rate is the counter (GFLOP/s or GOP/s).
void peak(benchmark::State& state, perf::Peak mix) {
  if (!perf::peak_available(mix)) {
    return state.SkipWithError((std::string("not available here: ") + perf::peak_description(mix)).c_str());
  }
  double rate = 0.0;
  for (auto _ : state) rate = std::max(rate, perf::measure_peak(mix));
  state.counters[perf::peak_unit(mix)] = rate;
  state.SetLabel(perf::peak_description(mix));
}
BENCHMARK_CAPTURE(peak, fma256, perf::Peak::Fma256)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(peak, fma512, perf::Peak::Fma512)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(peak, bf16, perf::Peak::Bf16)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(peak, vnni, perf::Peak::Vnni)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(peak, int8_avx2, perf::Peak::Int8Avx2)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace vit::bench
