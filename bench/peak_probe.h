// The single-core FMA peak of this machine, measured (not looked up): a loop of independent
// 256-bit FMAs, enough accumulators to cover the FMA latency on two pipes. Kernel benchmarks
// report their speed as a fraction of it, in the same run (absolute speeds drift on a shared
// machine; the fraction does not).
#pragma once

namespace vit::bench {

// GFLOP/s of one thread running only FMAs, measured now (~0.05 s): call it right after the
// timed loop, so the clock speed it sees is the one the kernel saw.
double fma_peak_gflops();

}  // namespace vit::bench
