// The CPU-feature probe, VIT_ISA and the level cap (see cpu_features.h).
#include "kernels/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/check.h"
#include "kernels/gemm/packed_gemm.h"

namespace vit::kernels {
namespace {

CpuFeatures probe() {
  CpuFeatures f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return f;
}

Isa level_of(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma)) return Isa::Scalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl)) return Isa::Avx2;
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

Isa parse_isa(std::string_view name, std::string_view what) {
  if (name == "scalar") return Isa::Scalar;
  if (name == "avx2") return Isa::Avx2;
  if (name == "avx512") return Isa::Avx512;
  if (name == "avx512-vnni" || name == "vnni" || name == "native") return Isa::Avx512Vnni;
  fail("isa", "{}={}: expected scalar, avx2, avx512 or avx512-vnni (native: the CPU's best)", what, name);
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

Isa cpu_isa() {
  static const Isa level = level_of(cpu_features());
  return level;
}

Isa detected_isa() {
  static const Isa level = [] {
    const char* env = std::getenv("VIT_ISA");
    if (env == nullptr || *env == '\0') return cpu_isa();
    return std::min(cpu_isa(), parse_isa(env, "VIT_ISA"));
  }();
  return level;
}

Isa active_isa() {
  return static_cast<Isa>(std::min(static_cast<int>(detected_isa()), g_limit.load(std::memory_order_relaxed)));
}

void set_isa_limit(Isa limit) { g_limit.store(static_cast<int>(limit), std::memory_order_relaxed); }

Isa isa_limit() { return static_cast<Isa>(g_limit.load(std::memory_order_relaxed)); }

std::string kernels_summary() {
  // The int8 kernel's own table lives in gemm/int8_gemm.cpp; its levels: VNNI, AVX2, plain.
  const Isa isa = active_isa();
  const char* int8 = isa >= Isa::Avx512Vnni ? "avx512-vnni" : isa >= Isa::Avx2 ? "avx2" : "scalar";
  std::string s = isa_name(isa);
  s += " (fp32 ";
  s += packed_gemm_kernel_name();
  s += "), int8 ";
  s += int8;
  return s;
}

}  // namespace vit::kernels
