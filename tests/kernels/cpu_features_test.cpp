// The CPU-feature probe (kernels/cpu_features.h): the detected level agrees with the flags, the
// cap lowers the active level and never raises it, and a scoped cap restores the previous one.
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <string>

namespace vit::kernels {
namespace {

TEST(CpuFeatures, TheLevelFollowsTheFlags) {
  const CpuFeatures& f = cpu_features();
  const Isa level = detected_isa();
  EXPECT_EQ(level >= Isa::Avx2, f.avx2 && f.fma);
  if (level >= Isa::Avx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw);
  }
  EXPECT_EQ(level == Isa::Avx512Vnni, f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vnni);
  EXPECT_EQ(&cpu_features(), &f);  // probed once
  EXPECT_EQ(active_isa(), level);  // no cap by default
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
