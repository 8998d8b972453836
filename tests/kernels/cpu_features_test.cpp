// The CPU-feature probe (kernels/cpu_features.h): the detected level agrees with the flags, the
// cap lowers the active level and never raises it, and a scoped cap restores the previous one;
// VIT_ISA lowers the detected level; the level names parse; the kernel summary follows the cap.
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/check.h"

namespace vit::kernels {
namespace {

TEST(CpuFeatures, TheLevelFollowsTheFlags) {
  const CpuFeatures& f = cpu_features();
  const Isa cpu = cpu_isa();
  EXPECT_EQ(cpu >= Isa::Avx2, f.avx2 && f.fma);
  if (cpu >= Isa::Avx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl);
  }
  EXPECT_EQ(cpu == Isa::Avx512Vnni, f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  EXPECT_EQ(&cpu_features(), &f);  // probed once
  // VIT_ISA (the CI's stand-in for an older CPU) lowers the detected level, never raises it.
  const char* env = std::getenv("VIT_ISA");
  const Isa level = detected_isa();
  EXPECT_EQ(level, env && *env ? std::min(cpu, parse_isa(env, "VIT_ISA")) : cpu);
  EXPECT_EQ(active_isa(), level);  // no cap by default
}

TEST(CpuFeatures, IsaNamesParse) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni}) EXPECT_EQ(parse_isa(isa_name(isa), "t"), isa);
  EXPECT_EQ(parse_isa("native", "t"), Isa::Avx512Vnni);
  try {
    parse_isa("sse9", "VIT_ISA");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[isa] VIT_ISA=sse9: expected scalar, avx2"), std::string::npos) << e.what();
  }
}

TEST(CpuFeatures, TheSummaryNamesTheKernelsOfTheActiveLevel) {
  {
    const ScopedIsaLimit plain(Isa::Scalar);
    EXPECT_EQ(kernels_summary(), "scalar (fp32 scalar 6x16), int8 scalar");
  }
  if (detected_isa() >= Isa::Avx2) {
    const ScopedIsaLimit avx2(Isa::Avx2);
    EXPECT_EQ(kernels_summary(), "avx2 (fp32 avx2 6x16), int8 avx2");
  }
  if (detected_isa() >= Isa::Avx512) {
    const ScopedIsaLimit avx512(Isa::Avx512);
    EXPECT_EQ(kernels_summary().rfind("avx512 (fp32 avx512 8x32), int8 ", 0), 0u) << kernels_summary();
  }
}

TEST(CpuFeatures, ACapLowersTheActiveLevelForAScope) {
  const Isa level = detected_isa();
  {
    const ScopedIsaLimit plain(Isa::Scalar);
    EXPECT_EQ(active_isa(), Isa::Scalar);
    EXPECT_FALSE(isa_enabled(Isa::Avx2));
    EXPECT_TRUE(isa_enabled(Isa::Scalar));
    {
      const ScopedIsaLimit higher(Isa::Avx512Vnni);  // a cap above the CPU is the CPU's level
      EXPECT_EQ(active_isa(), level);
    }
    EXPECT_EQ(active_isa(), Isa::Scalar);
    const ScopedIsaLimit avx2(Isa::Avx2);
    EXPECT_EQ(active_isa(), level >= Isa::Avx2 ? Isa::Avx2 : level);
  }
  EXPECT_EQ(active_isa(), level);
  EXPECT_EQ(std::string(isa_name(Isa::Avx512Vnni)), "avx512-vnni");
  EXPECT_EQ(std::string(isa_name(Isa::Scalar)), "scalar");
}

}  // namespace
}  // namespace vit::kernels
