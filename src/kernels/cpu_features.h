// Which instruction sets the fast kernels may use: the one CPU-feature probe of the project
// (as ggml's cpu-feats and MLX's dispatch table), asked once, and a process-wide cap that forces a
// lower level so tests and benchmarks can run every path on one machine.
//
// Levels are ordered; a kernel entry made for level L runs when active_isa() >= L:
//   Scalar      plain C++ (and BLAS for float32 GEMMs)
//   Avx2        AVX2 + FMA: the float32 6 x 16 micro-kernel, the int8 vpmaddubsw micro-kernel
//   Avx512      AVX-512 F + BW + VL: the float32 8 x 32 micro-kernel
//   Avx512Vnni  + AVX-512 VNNI: the int8 vpdpbusd micro-kernel
// A new ISA (AVX-512 bf16, ...) is one flag here, one level, and one entry in each dispatch
// table that gains a micro-kernel for it (gemm/packed_gemm.cpp, gemm/int8_gemm.cpp).
//
// The library is built for baseline x86-64 (the VIT_NATIVE CMake option aside): each ISA's
// kernels carry their own target attributes and are picked at run time from this probe, so one
// build runs at full speed on any x86-64 CPU.
//
// The environment variable VIT_ISA (scalar, avx2, avx512 or avx512-vnni), read once with the
// probe, lowers the detected level as if the CPU lacked the rest: a process started with
// VIT_ISA=avx2 behaves as on an AVX2-only machine (the CI stand-in for one). A value above the
// CPU's level is the CPU's level; an unknown value is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace vit::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
};

enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Vnni = 3 };

const char* isa_name(Isa isa);
// "scalar", "avx2", "avx512", "avx512-vnni" (also "vnni", "native": the highest) to a level;
// throws naming the accepted values otherwise. `what` names the source in the message.
Isa parse_isa(std::string_view name, std::string_view what);

// What this CPU has (probed on the first call, then cached).
const CpuFeatures& cpu_features();
// The highest level this CPU supports, whatever VIT_ISA says.
Isa cpu_isa();
// The level kernels may reach: cpu_isa() lowered by VIT_ISA when it is set.
Isa detected_isa();
// The level kernels dispatch on: the detected one, lowered by the cap below.
Isa active_isa();
// True when kernels may use `isa` (active_isa() >= isa).
inline bool isa_enabled(Isa isa) { return static_cast<int>(active_isa()) >= static_cast<int>(isa); }

// Caps the level for the whole process (kernels read it at each call); Avx512Vnni lifts the cap.
// For tests and benchmarks: set it while no kernel runs on another thread.
void set_isa_limit(Isa limit);
Isa isa_limit();

// Caps the level for a scope, restoring the previous cap when it ends.
class ScopedIsaLimit {
 public:
  explicit ScopedIsaLimit(Isa limit) : previous_(isa_limit()) { set_isa_limit(limit); }
  ~ScopedIsaLimit() { set_isa_limit(previous_); }
  ScopedIsaLimit(const ScopedIsaLimit&) = delete;
  ScopedIsaLimit& operator=(const ScopedIsaLimit&) = delete;

 private:
  Isa previous_;
};

// Which kernels run at the active level, for `vit bench` / `vit info`, e.g.
// "avx512-vnni (fp32 avx512 8x32), int8 avx512-vnni".
std::string kernels_summary();

}  // namespace vit::kernels
