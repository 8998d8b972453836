// Helpers shared by the kernel tests: the tolerances they use (from support/tolerances.h),
// seeded random vectors, an element-wise comparison that names the tensor, the worst element and
// the first values, central finite differences in double, and the ISA levels a test forces in turn.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/random.h"
#include "kernels/cpu_features.h"
#include "support/tolerances.h"

namespace vit::kernels::test {

using vit::testing::kDoubleFormulaTol;
using vit::testing::kDoubleKernelTol;
using vit::testing::kDoubleUlpTol;
using vit::testing::kExactTol;
using vit::testing::kFiniteDiffStep;
using vit::testing::kFloatKernelTol;
using vit::testing::kFloatTinyAbsTol;
using vit::testing::kKernelGradcheckTol;
using vit::testing::kLargeOffsetVarianceTol;
using vit::testing::kLinearKernelTol;
using vit::testing::kSamplingSigmas;

// The levels a per-ISA kernel is tested at, each forced with ScopedIsaLimit (a level above the
// CPU's runs the CPU's: on an AVX2 machine the AVX-512 round repeats the AVX2 one).
inline constexpr Isa kIsaPaths[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};

// A fast kernel in T vs a double reference (scaled, as close() applies it).
template <typename T>
constexpr double tolerance_for() {
  return std::is_same_v<T, float> ? kFloatKernelTol : kDoubleKernelTol;
}

template <typename T>
std::vector<T> random_vector(int64_t n, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator gen(seed);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(gen.normal() * scale + shift);
  return v;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// |actual - expected| <= rtol * (|expected| + max finite |expected|) (the scale term keeps
// near-zero entries of a large tensor from being held to an impossible bound). NaN must meet NaN
// and an infinity the same infinity.
// scale_floor raises the scale where a result's natural magnitude exceeds its values (e.g. a
// gradient that cancels to ~0 out of large terms).
template <typename T>
::testing::AssertionResult close(const std::vector<T>& actual, const std::vector<double>& expected, double rtol,
                                 const std::string& name, double scale_floor = 0.0) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << name << ": size " << actual.size() << " != expected " << expected.size();
  }
  double scale = scale_floor;
  for (double e : expected) {
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
  }
  size_t failures = 0, worst_at = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = expected[i];
    bool ok;
    if (std::isnan(e) || std::isinf(e)) {
      ok = (std::isnan(e) && std::isnan(a)) || a == e;
    } else {
      ok = std::fabs(a - e) <= rtol * (std::fabs(e) + scale);  // false for NaN/inf actual
    }
    if (!ok) {
      const double excess = std::isfinite(a) ? std::fabs(a - e) - rtol * (std::fabs(e) + scale) : INFINITY;
      if (failures == 0 || excess > worst_excess) {
        worst_excess = excess;
        worst_at = i;
      }
      ++failures;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  std::ostringstream out;
  out.precision(10);
  out << name << ": " << failures << " of " << actual.size() << " elements differ (rtol " << rtol << ", scale " << scale
      << "); worst at [" << worst_at << "]: actual " << static_cast<double>(actual[worst_at]) << " expected "
      << expected[worst_at] << " (|diff| " << std::fabs(static_cast<double>(actual[worst_at]) - expected[worst_at])
      << ")\n  actual:  ";
  for (size_t i = 0; i < std::min<size_t>(actual.size(), 6); ++i) out << " " << static_cast<double>(actual[i]);
  out << "\n  expected:";
  for (size_t i = 0; i < std::min<size_t>(expected.size(), 6); ++i) out << " " << expected[i];
  return ::testing::AssertionFailure() << out.str();
}

// Gradient of a scalar function of x by central differences (x is restored afterwards).
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& loss,
                                            std::vector<double> x, double step = kFiniteDiffStep) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double plus = loss(x);
    x[i] = saved - step;
    const double minus = loss(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2.0 * step);
  }
  return grad;
}

// |analytic - numeric| <= kKernelGradcheckTol * (1 + |numeric|) for every element.
inline ::testing::AssertionResult gradient_close(const std::vector<double>& analytic,
                                                 const std::vector<double>& numeric, const std::string& name,
                                                 double tol = kKernelGradcheckTol) {
  if (analytic.size() != numeric.size()) {
    return ::testing::AssertionFailure() << name << ": size " << analytic.size() << " != " << numeric.size();
  }
  size_t failures = 0, worst_at = 0;
  double worst = -1.0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const double diff = std::fabs(analytic[i] - numeric[i]);
    const bool bad = !(diff <= tol * (1.0 + std::fabs(numeric[i])));
    if (bad) ++failures;
    if (bad && (std::isnan(diff) || diff > worst)) {
      worst = std::isnan(diff) ? INFINITY : diff;
      worst_at = i;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": " << failures << " of " << analytic.size()
                                       << " gradient elements differ from central differences (tol " << tol
                                       << "); worst at [" << worst_at << "]: analytic " << analytic[worst_at]
                                       << " numeric " << numeric[worst_at];
}

}  // namespace vit::kernels::test
