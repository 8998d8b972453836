// The arithmetic peaks of this machine, measured (not looked up): for each instruction mix the
// GEMM micro-kernels are built from, one thread runs a loop of that mix alone, with enough
// independent accumulators to cover its latency on every pipe, and the best of several short
// trials is its rate (~10 ms a mix). `vit bench --gemms` and the kernel benchmarks (bench/) report
// a GEMM's speed as a share of the matching peak measured in the same run: absolute speeds drift
// on a shared machine and with the clock, the share much less.
//
//   Fma256    vfmadd231ps ymm (AVX2 + FMA)       8 lanes x 2 flop: the AVX2 float32 kernel
//   Fma512    vfmadd231ps zmm (AVX-512 F)        16 lanes x 2 flop: the AVX-512 float32 kernel
//   Bf16      vdpbf16ps zmm (AVX512_BF16)        16 lanes x 2 products x 2 flop: the bf16 kernel
//   Vnni      vpdpbusd zmm (AVX512_VNNI)         16 lanes x 4 products x 2 ops: the VNNI int8 kernel
//   Int8Avx2  vpmaddubsw + vpmaddwd + vpaddd ymm 32 products x 2 ops per triple: the AVX2 int8
//             kernel's inner step (7-bit weights; its 8-bit form adds a vpsignb per step)
// Rates are per thread, in G flop/s (floats) or G op/s (integers, a multiply-add counted as two).
// A mix runs only where the CPU has it and the ISA cap (kernels/cpu_features.h) allows it: the
// others read 0, so `VIT_ISA=avx2` probes what an AVX2-only machine would.
#pragma once

#include <array>
#include <string>

namespace vit::perf {

enum class Peak : int { Fma256 = 0, Fma512, Bf16, Vnni, Int8Avx2 };
inline constexpr int kPeakCount = 5;
inline constexpr std::array<Peak, kPeakCount> kAllPeaks = {Peak::Fma256, Peak::Fma512, Peak::Bf16, Peak::Vnni,
                                                           Peak::Int8Avx2};

// "fma256", "fma512", "bf16", "vnni", "int8_avx2" (the JSON keys).
const char* peak_key(Peak peak);
// What runs, for people: "zmm FMA (AVX-512 F)", ...
const char* peak_description(Peak peak);
// "GFLOP/s" or "GOP/s".
const char* peak_unit(Peak peak);

// True when this process may run the mix: the CPU has it and the ISA cap allows its level.
bool peak_available(Peak peak);

// One thread's rate of the mix, measured now (~10 ms); 0 where it is not available.
double measure_peak(Peak peak);

// Every mix, measured one after the other in the same run.
struct Peaks {
  std::array<double, kPeakCount> per_thread{};  // by Peak; 0: not available
  double operator[](Peak peak) const { return per_thread[static_cast<size_t>(peak)]; }
  // {"fma256": 135.2, ...}: the available mixes only.
  std::string to_json() const;
};
Peaks measure_peaks();

// The yardstick of a whole model's speed in one precision, as the speed issues count it so that
// shares carry across machines: one thread's float32 FMA rate (the better of ymm and zmm, measured
// now) times the ratio of the precision's instruction to it on AVX-512 servers: 1 for float32, 2
// for bf16 (vdpbf16ps: two products a lane), 4 for int8 (vpdpbusd: four). Where this CPU lacks
// that instruction the precision runs on something slower, and `ceiling` says the share it could
// reach at best (bf16 on float32 FMAs: 1/2; int8 on the AVX2 triple: its measured rate over 4x
// the FMA rate); 1 where the instruction is here.
struct PrecisionPeak {
  double per_thread = 0;      // GFLOP/s (int8: GOP/s) of one thread; 0: no SIMD FMA at the ISA level
  double fma_per_thread = 0;  // the float32 FMA rate it is built on
  Peak fma = Peak::Fma256;    // which of ymm / zmm gave it
  int factor = 1;             // 1, 2 or 4
  double ceiling = 1;         // the best share this CPU's instructions allow
  std::string note;           // why the ceiling is below 1 ("" when it is 1)
};
// precision: "float32", "bf16" or "int8"; anything else is refused.
PrecisionPeak precision_peak(const std::string& precision);

}  // namespace vit::perf
