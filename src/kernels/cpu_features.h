// Which instruction sets the fast kernels may use: the one CPU-feature probe of the project
// (as ggml's cpu-feats and MLX's dispatch table), asked once, and a process-wide cap that forces a
// lower level so tests and benchmarks can run every path on one machine.
//
// Levels are ordered; a kernel entry made for level L runs when active_isa() >= L:
//   Scalar      plain C++ (and BLAS for float32 GEMMs)
//   Avx2        AVX2 + FMA: the float32 6 x 16 micro-kernel, the int8 vpmaddubsw micro-kernel
//   Avx512      AVX-512 F + BW (no micro-kernel yet: the float32 AVX-512 one plugs in here)
//   Avx512Vnni  + AVX-512 VNNI: the int8 vpdpbusd micro-kernel
// A new ISA (AVX-512 bf16, ...) is one flag here, one level, and one entry in each dispatch
// table that gains a micro-kernel for it (packed_gemm.cpp, int8_gemm.cpp).
#pragma once

#include <cstdint>

namespace vit::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vnni = false, avx512bf16 = false;
};

enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Vnni = 3 };

const char* isa_name(Isa isa);

// What this CPU has (probed on the first call, then cached).
const CpuFeatures& cpu_features();
// The highest level this CPU supports.
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

}  // namespace vit::kernels
