// The single-core FMA peak of this machine, measured (not looked up): a loop of independent
// 256-bit (or 512-bit) FMAs, enough accumulators to cover the FMA latency on two pipes. Kernel benchmarks
// report their speed as a fraction of it, in the same run (absolute speeds drift on a shared
// machine; the fraction does not).
#pragma once

namespace vit::bench {

// GFLOP/s of one thread running only FMAs, measured now (~0.05 s): call it right after the
// timed loop, so the clock speed it sees is the one the kernel saw.
double fma_peak_gflops();
// The same with 512-bit FMAs (0 without AVX-512 F).
double fma512_peak_gflops();
// The peak of the widest FMA the active ISA level lets the kernels use (kernels/cpu_features.h:
// 512-bit from Isa::Avx512, else 256-bit).
double active_fma_peak_gflops();

}  // namespace vit::bench
