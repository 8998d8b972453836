// The arithmetic peak probes (perf/peak_probe.h): each mix the CPU has reads a positive rate, a mix
// above the ISA cap (kernels::ScopedIsaLimit) reads 0 and is left out of the JSON. No timing
// assertions beyond sanity: the machine may be shared.
#include "perf/peak_probe.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/cpu_features.h"

namespace vit::perf {
namespace {

using kernels::cpu_features;
using kernels::detected_isa;
using kernels::Isa;
using kernels::ScopedIsaLimit;

// Whether this process may run the mix, from the flags and the detected level (VIT_ISA included).
bool expected_available(Peak peak) {
  const Isa level = detected_isa();
  switch (peak) {
    case Peak::Fma256:
    case Peak::Int8Avx2:
      return level >= Isa::Avx2;
    case Peak::Fma512:
      return level >= Isa::Avx512;
    case Peak::Bf16:
      return level >= Isa::Avx512 && cpu_features().avx512bf16;
    case Peak::Vnni:
      return level >= Isa::Avx512Vnni;
  }
  return false;
}

TEST(PeakProbe, EveryMixTheCpuHasReadsAPositiveRate) {
  const Peaks peaks = measure_peaks();
  for (Peak p : kAllPeaks) {
    SCOPED_TRACE(peak_key(p));
    EXPECT_EQ(peak_available(p), expected_available(p));
    if (expected_available(p)) {
      EXPECT_GT(peaks[p], 0.1);  // GFLOP/s or GOP/s: any CPU with the mix does far more
      EXPECT_LT(peaks[p], 1e5);
    } else {
      EXPECT_EQ(peaks[p], 0.0);
    }
  }
  const auto j = nlohmann::json::parse(peaks.to_json());
  for (Peak p : kAllPeaks) EXPECT_EQ(j.contains(peak_key(p)), peaks[p] > 0) << peak_key(p);
}

TEST(PeakProbe, AMixAboveTheIsaCapReadsZero) {
  {
    const ScopedIsaLimit avx2(Isa::Avx2);
    for (Peak p : {Peak::Fma512, Peak::Bf16, Peak::Vnni}) {
      EXPECT_FALSE(peak_available(p)) << peak_key(p);
      EXPECT_EQ(measure_peak(p), 0.0) << peak_key(p);
    }
    const Peaks peaks = measure_peaks();
    EXPECT_EQ(peaks[Peak::Fma512], 0.0);
    EXPECT_EQ(peaks[Peak::Fma256] > 0, detected_isa() >= Isa::Avx2);
    const auto j = nlohmann::json::parse(peaks.to_json());
    EXPECT_FALSE(j.contains("fma512"));
    EXPECT_FALSE(j.contains("vnni"));
  }
  {
    const ScopedIsaLimit scalar(Isa::Scalar);
    for (Peak p : kAllPeaks) EXPECT_EQ(measure_peak(p), 0.0) << peak_key(p);
    EXPECT_EQ(measure_peaks().to_json(), "{}");
  }
  // The cap lifted: the mixes come back.
  for (Peak p : kAllPeaks) EXPECT_EQ(peak_available(p), expected_available(p)) << peak_key(p);
}

TEST(PeakProbe, NamesAndUnits) {
  EXPECT_STREQ(peak_key(Peak::Fma512), "fma512");
  EXPECT_STREQ(peak_key(Peak::Int8Avx2), "int8_avx2");
  EXPECT_STREQ(peak_description(Peak::Bf16), "vdpbf16ps (AVX512_BF16)");
  EXPECT_STREQ(peak_unit(Peak::Fma256), "GFLOP/s");
  EXPECT_STREQ(peak_unit(Peak::Vnni), "GOP/s");
  EXPECT_STREQ(peak_unit(Peak::Int8Avx2), "GOP/s");
}

}  // namespace
}  // namespace vit::perf
