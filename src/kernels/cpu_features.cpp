// The CPU-feature probe and the level cap (see cpu_features.h).
#include "kernels/cpu_features.h"

#include <algorithm>
#include <atomic>

namespace vit::kernels {
namespace {

CpuFeatures probe() {
  CpuFeatures f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return f;
}

Isa level_of(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma)) return Isa::Scalar;
  if (!(f.avx512f && f.avx512bw)) return Isa::Avx2;
  return f.avx512vnni ? Isa::Avx512Vnni : Isa::Avx512;
}

std::atomic<int> g_limit{static_cast<int>(Isa::Avx512Vnni)};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

Isa detected_isa() {
  static const Isa level = level_of(cpu_features());
  return level;
}

Isa active_isa() {
  return static_cast<Isa>(std::min(static_cast<int>(detected_isa()), g_limit.load(std::memory_order_relaxed)));
}

void set_isa_limit(Isa limit) { g_limit.store(static_cast<int>(limit), std::memory_order_relaxed); }

Isa isa_limit() { return static_cast<Isa>(g_limit.load(std::memory_order_relaxed)); }

}  // namespace vit::kernels
