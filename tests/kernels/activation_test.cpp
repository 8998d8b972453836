// Unary kernels against unary_ref / unary_grad_ref at awkward lengths (threaded and not), the
// references against independent formulas and central differences, extreme inputs (GELU at
// ±300, sigmoid/tanh saturation), accumulation of backward, and pow/affine against naive loops.
#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;

const std::vector<Unary> kAllOps = {Unary::Neg,  Unary::Exp,  Unary::Log,      Unary::Sqrt,    Unary::Tanh,
                                    Unary::Relu, Unary::Gelu, Unary::GeluTanh, Unary::Sigmoid, Unary::Abs};
// Awkward lengths plus one above the kernels' threading threshold (1 << 15).
const std::vector<int64_t> kLengths = {1, 3, 7, 31, 33, 65, 197, 40000};

bool positive_domain(Unary op) { return op == Unary::Log || op == Unary::Sqrt; }

// Inputs inside the op's domain: (0.05, ~10) for log/sqrt, N(0, 2^2) otherwise.
template <typename T>
std::vector<T> inputs_for(Unary op, int64_t n, uint64_t seed) {
  std::vector<T> x = random_vector<T>(n, seed, 2.0);
  if (positive_domain(op)) {
    for (auto& v : x) v = static_cast<T>(std::fabs(v) + 0.05);
  }
  return x;
}

// Independent double formulas (not the kernel's code): erfc-based GELU, stable sigmoid.
double exact_value(Unary op, double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  switch (op) {
    case Unary::Gelu:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Unary::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case Unary::Sigmoid:
      return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    case Unary::Tanh:
      return std::tanh(x);
    case Unary::Relu:
      return x > 0 ? x : 0.0;
    case Unary::Abs:
      return std::fabs(x);
    case Unary::Neg:
      return -x;
    case Unary::Exp:
      return std::exp(x);
    case Unary::Log:
      return std::log(x);
    case Unary::Sqrt:
      return std::sqrt(x);
  }
  return NAN;
}

// Closed-form derivatives (PyTorch's conventions at kinks: relu'(0) = 0, abs'(0) = 0).
double exact_slope(Unary op, double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588, kInvSqrt2Pi = 0.39894228040143267794;
  switch (op) {
    case Unary::Gelu:
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) * kInvSqrt2Pi;
    case Unary::GeluTanh: {
      const double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
    }
    case Unary::Sigmoid:
      return exact_value(op, x) * exact_value(op, -x);
    case Unary::Tanh:
      return 1.0 / (std::cosh(x) * std::cosh(x));
    case Unary::Relu:
      return x > 0 ? 1.0 : 0.0;
    case Unary::Abs:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    case Unary::Neg:
      return -1.0;
    case Unary::Exp:
      return std::exp(x);
    case Unary::Log:
      return 1.0 / x;
    case Unary::Sqrt:
      return 0.5 / std::sqrt(x);
  }
  return NAN;
}

template <typename T>
class Activation : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Activation, Types);

TYPED_TEST(Activation, ForwardMatchesReference) {
  using T = TypeParam;
  for (Unary op : kAllOps) {
    for (int64_t n : kLengths) {
      const std::vector<T> x = inputs_for<T>(op, n, 10 + static_cast<uint64_t>(n));
      std::vector<T> y(n);
      unary_forward<T>(op, x.data(), y.data(), n);
      std::vector<double> expected(n);
      for (int64_t i = 0; i < n; ++i) expected[i] = unary_ref(op, x[i]);
      EXPECT_TRUE(close(y, expected, test::tolerance_for<T>(),
                        std::string(unary_name(op)) + " forward n=" + std::to_string(n)));
    }
  }
}

TYPED_TEST(Activation, BackwardMatchesReferenceAndAccumulates) {
  using T = TypeParam;
  for (Unary op : kAllOps) {
    for (int64_t n : kLengths) {
      const std::vector<T> x = inputs_for<T>(op, n, 20 + static_cast<uint64_t>(n));
      const std::vector<T> dy = random_vector<T>(n, 30 + static_cast<uint64_t>(n));
      std::vector<T> y(n), dx = random_vector<T>(n, 40 + static_cast<uint64_t>(n), 0.5);  // non-zero: +=
      unary_forward<T>(op, x.data(), y.data(), n);
      std::vector<double> expected(n);
      for (int64_t i = 0; i < n; ++i) expected[i] = dx[i] + static_cast<double>(dy[i]) * unary_grad_ref(op, x[i]);
      unary_backward<T>(op, x.data(), y.data(), dy.data(), dx.data(), n);
      EXPECT_TRUE(close(dx, expected, test::tolerance_for<T>(),
                        std::string(unary_name(op)) + " backward n=" + std::to_string(n)));
    }
  }
}

// The references themselves: values against independent formulas, derivatives against
// central differences, on moderate inputs in each op's domain.
TEST(ActivationReference, MatchesIndependentFormulasAndFiniteDifferences) {
  const std::vector<double> points = {-6.0, -3.1, -1.0, -0.4, -1e-3, 1e-3, 0.3, 0.9, 2.2, 4.7, 7.5};
  for (Unary op : kAllOps) {
    for (double p : points) {
      const double x = positive_domain(op) ? std::fabs(p) + 0.05 : p;
      const double h = test::kFiniteDiffStep;
      const double numeric = (unary_ref(op, x + h) - unary_ref(op, x - h)) / (2 * h);
      EXPECT_NEAR(unary_ref(op, x), exact_value(op, x), test::kDoubleFormulaTol * (1 + std::fabs(exact_value(op, x))))
          << unary_name(op) << " at " << x;
      EXPECT_NEAR(unary_grad_ref(op, x), numeric, test::kKernelGradcheckTol * (1 + std::fabs(numeric)))
          << unary_name(op) << "' at " << x;
    }
  }
}

// Saturating ops at extreme and tiny inputs: finite, and equal to the exact values (which
// underflow to 0 where the kernel's format cannot hold them).
TYPED_TEST(Activation, ExtremeInputsStayFiniteAndExact) {
  using T = TypeParam;
  const std::vector<T> x = {T(-300), T(-20), T(-1e-30), T(-1e-7), T(0), T(1e-30), T(1e-7), T(20), T(300)};
  const int64_t n = static_cast<int64_t>(x.size());
  for (Unary op : {Unary::Gelu, Unary::GeluTanh, Unary::Sigmoid, Unary::Tanh, Unary::Relu, Unary::Abs, Unary::Neg}) {
    std::vector<T> y(n), dx(n, T(0));
    const std::vector<T> dy(n, T(1));
    unary_forward<T>(op, x.data(), y.data(), n);
    unary_backward<T>(op, x.data(), y.data(), dy.data(), dx.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x[i];
      const double value = exact_value(op, xi), slope = exact_slope(op, xi);
      ASSERT_TRUE(std::isfinite(y[i]) && std::isfinite(dx[i])) << unary_name(op) << " at " << xi;
      EXPECT_NEAR(y[i], value, test::tolerance_for<T>() * std::fabs(value) + test::kFloatTinyAbsTol)
          << unary_name(op) << " at " << xi;
      EXPECT_NEAR(dx[i], slope, test::tolerance_for<T>() * (1 + std::fabs(slope))) << unary_name(op) << "' at " << xi;
    }
  }
  // Exact limits, spelled out.
  std::vector<T> y(n), g(n, T(0));
  const std::vector<T> ones(n, T(1));
  unary_forward<T>(Unary::Gelu, x.data(), y.data(), n);
  unary_backward<T>(Unary::Gelu, x.data(), y.data(), ones.data(), g.data(), n);
  EXPECT_EQ(y[0], T(0));
  EXPECT_EQ(y[8], T(300));
  EXPECT_EQ(g[0], T(0));
  EXPECT_EQ(g[8], T(1));
  EXPECT_EQ(g[4], T(0.5));  // GELU'(0) = 1/2
}

TYPED_TEST(Activation, ReluAndAbsGradientAtZeroIsZero) {
  using T = TypeParam;
  const std::vector<T> x = {T(0), T(-0.0), T(2), T(-2)};
  for (Unary op : {Unary::Relu, Unary::Abs}) {
    std::vector<T> y(4), dx(4, T(0));
    const std::vector<T> dy(4, T(3));
    unary_forward<T>(op, x.data(), y.data(), 4);
    unary_backward<T>(op, x.data(), y.data(), dy.data(), dx.data(), 4);
    EXPECT_EQ(dx[0], T(0)) << unary_name(op);
    EXPECT_EQ(dx[1], T(0)) << unary_name(op);
    EXPECT_EQ(dx[2], T(3)) << unary_name(op);
    EXPECT_EQ(dx[3], op == Unary::Relu ? T(0) : T(-3)) << unary_name(op);
  }
}

TYPED_TEST(Activation, PowMatchesNaiveAndAccumulates) {
  using T = TypeParam;
  for (double p : {2.0, 3.0, 0.5, -1.0, 0.0, 1.5, 1.0}) {
    for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{197}, int64_t{40000}}) {
      std::vector<T> x = random_vector<T>(n, 50 + static_cast<uint64_t>(n));
      for (auto& v : x) v = static_cast<T>(std::fabs(v) + 0.1);  // positive: fractional powers defined
      const std::vector<T> dy = random_vector<T>(n, 60 + static_cast<uint64_t>(n));
      std::vector<T> y(n), dx = random_vector<T>(n, 70 + static_cast<uint64_t>(n));
      std::vector<double> ey(n), edx(n);
      for (int64_t i = 0; i < n; ++i) {
        ey[i] = std::pow(static_cast<double>(x[i]), p);
        edx[i] = dx[i] + static_cast<double>(dy[i]) * (p == 0.0 ? 0.0 : p * std::pow(static_cast<double>(x[i]), p - 1));
      }
      pow_forward<T>(x.data(), p, y.data(), n);
      pow_backward<T>(x.data(), p, dy.data(), dx.data(), n);
      const std::string name = "pow p=" + std::to_string(p) + " n=" + std::to_string(n);
      EXPECT_TRUE(close(y, ey, test::tolerance_for<T>(), name + " forward"));
      EXPECT_TRUE(close(dx, edx, test::tolerance_for<T>(), name + " backward"));
    }
  }
}

TYPED_TEST(Activation, AffineMatchesNaive) {
  using T = TypeParam;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{65}, int64_t{40000}}) {
    const std::vector<T> x = random_vector<T>(n, 80 + static_cast<uint64_t>(n), 3.0);
    for (auto [a, b] : {std::pair{0.3, -1.25}, std::pair{-1.0, 0.0}, std::pair{1.0, 7.0}, std::pair{0.0, 2.0}}) {
      std::vector<T> y(n);
      affine_forward<T>(x.data(), a, b, y.data(), n);
      std::vector<double> expected(n);
      for (int64_t i = 0; i < n; ++i) expected[i] = a * static_cast<double>(x[i]) + b;
      EXPECT_TRUE(close(y, expected, test::tolerance_for<T>(), "affine n=" + std::to_string(n)));
    }
  }
}

TEST(Activation, NamesAreDistinct) {
  for (size_t i = 0; i < kAllOps.size(); ++i) {
    for (size_t j = i + 1; j < kAllOps.size(); ++j) {
      EXPECT_STRNE(unary_name(kAllOps[i]), unary_name(kAllOps[j]));
    }
  }
  EXPECT_STREQ(unary_name(Unary::Gelu), "gelu");
}

}  // namespace
}  // namespace vit::kernels
