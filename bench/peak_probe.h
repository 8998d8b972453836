// The single-core FMA peak of this machine for the kernel benchmarks, measured in the same run
// (perf/peak_probe.h has the probes of every instruction mix; these are its float32 ones). Kernel
// benchmarks report their speed as a fraction of it (absolute speeds drift on a shared machine;
// the fraction does not).
#pragma once

namespace vit::bench {

// GFLOP/s of one thread running only 256-bit FMAs, measured now (~10 ms): call it right after the
// timed loop, so the clock speed it sees is the one the kernel saw.
double fma_peak_gflops();
// The same with 512-bit FMAs (0 without AVX-512 F, or with the ISA capped below it).
double fma512_peak_gflops();
// The peak of the widest FMA the active ISA level lets the kernels use (kernels/cpu_features.h:
// 512-bit from Isa::Avx512, else 256-bit).
double active_fma_peak_gflops();

}  // namespace vit::bench
