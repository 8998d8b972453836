// Softmax / log-softmax kernels: forward against the _forward_ref kernels and naive double
// formulas, backward against the _backward_ref kernels (explicit Jacobians), the kernel pairs and
// the reference pairs against central differences, rows with -inf (partly: 0 there; entirely:
// NaN, as PyTorch), magnitudes of ±1e4, in-place use, threaded row counts.
#include "kernels/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

struct RowsN {
  int64_t rows, n;
};
// n from 1, 3, 7, 31, 33, 65, 197; 100 x 197 crosses the kernels' threading threshold (1 << 14 elements).
const std::vector<RowsN> kSizes = {{3, 1}, {5, 7}, {4, 197}, {100, 197}, {1, 33}, {2, 3}, {3, 31}, {2, 65}};

// Naive double softmax of one row (max-subtracted).
std::vector<double> naive_softmax(const std::vector<double>& x, int64_t rows, int64_t n, bool use_log) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[r * n + i]);
    for (int64_t i = 0; i < n; ++i) sum += std::exp(x[r * n + i] - m);
    for (int64_t i = 0; i < n; ++i) {
      y[r * n + i] = use_log ? x[r * n + i] - m - std::log(sum) : std::exp(x[r * n + i] - m) / sum;
    }
  }
  return y;
}

template <typename T>
class Softmax : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Softmax, Types);

TYPED_TEST(Softmax, ForwardMatchesReferenceAndNaive) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    const std::vector<T> x = random_vector<T>(s.rows * s.n, 1 + static_cast<uint64_t>(s.n), 3.0);
    std::vector<T> y(x.size()), y_ref(x.size()), log_y(x.size()), log_y_ref(x.size()), in_place = x;
    softmax_forward<T>(x.data(), y.data(), s.rows, s.n);
    softmax_forward_ref<T>(x.data(), y_ref.data(), s.rows, s.n);
    log_softmax_forward<T>(x.data(), log_y.data(), s.rows, s.n);
    log_softmax_forward_ref<T>(x.data(), log_y_ref.data(), s.rows, s.n);
    softmax_forward<T>(in_place.data(), in_place.data(), s.rows, s.n);  // as attention calls it
    const std::string size = " " + std::to_string(s.rows) + "x" + std::to_string(s.n);
    const double tol = test::tolerance_for<T>();
    EXPECT_TRUE(close(y, to_double(y_ref), tol, "softmax vs ref" + size));
    EXPECT_TRUE(close(y, naive_softmax(to_double(x), s.rows, s.n, false), tol, "softmax vs naive" + size));
    EXPECT_TRUE(close(y_ref, naive_softmax(to_double(x), s.rows, s.n, false), tol, "softmax_ref vs naive" + size));
    EXPECT_TRUE(close(log_y, naive_softmax(to_double(x), s.rows, s.n, true), tol, "log_softmax vs naive" + size));
    EXPECT_TRUE(close(log_y, to_double(log_y_ref), tol, "log_softmax vs ref" + size));
    EXPECT_TRUE(
        close(log_y_ref, naive_softmax(to_double(x), s.rows, s.n, true), tol, "log_softmax_ref vs naive" + size));
    EXPECT_TRUE(close(in_place, to_double(y), test::kExactTol, "softmax in place" + size));
  }
}

// dx += J^T dy against softmax_backward_ref / log_softmax_backward_ref (the explicit Jacobians,
// in double from x). dx starts non-zero to check accumulation.
TYPED_TEST(Softmax, BackwardMatchesReferenceAndAccumulates) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    const int64_t total = s.rows * s.n;
    const std::vector<T> x = random_vector<T>(total, 2 + static_cast<uint64_t>(s.n), 2.0);
    const std::vector<T> dy = random_vector<T>(total, 3 + static_cast<uint64_t>(s.n));
    std::vector<T> y(total), log_y(total);
    softmax_forward<T>(x.data(), y.data(), s.rows, s.n);
    log_softmax_forward<T>(x.data(), log_y.data(), s.rows, s.n);
    std::vector<T> dx = random_vector<T>(total, 4, 0.5), log_dx = dx, dx_ref = dx, log_dx_ref = dx;
    std::vector<double> expected = to_double(dx), log_expected = to_double(dx);
    softmax_backward_ref<double>(to_double(x).data(), to_double(dy).data(), expected.data(), s.rows, s.n);
    log_softmax_backward_ref<double>(to_double(x).data(), to_double(dy).data(), log_expected.data(), s.rows, s.n);
    softmax_backward<T>(y.data(), dy.data(), dx.data(), s.rows, s.n);
    log_softmax_backward<T>(log_y.data(), dy.data(), log_dx.data(), s.rows, s.n);
    softmax_backward_ref<T>(x.data(), dy.data(), dx_ref.data(), s.rows, s.n);
    log_softmax_backward_ref<T>(x.data(), dy.data(), log_dx_ref.data(), s.rows, s.n);
    const std::string size = " " + std::to_string(s.rows) + "x" + std::to_string(s.n);
    const double tol = test::tolerance_for<T>();
    EXPECT_TRUE(close(dx, expected, tol, "softmax dx" + size));
    EXPECT_TRUE(close(log_dx, log_expected, tol, "log_softmax dx" + size));
    EXPECT_TRUE(close(dx_ref, expected, tol, "softmax_backward_ref dx" + size));
    EXPECT_TRUE(close(log_dx_ref, log_expected, tol, "log_softmax_backward_ref dx" + size));
  }
}

// Forward + backward pair in double against central differences of L = sum(w * f(x)).
TEST(SoftmaxGradient, MatchesFiniteDifferences) {
  const int64_t rows = 2, n = 7;
  const std::vector<double> x = random_vector<double>(rows * n, 5, 2.0), w = random_vector<double>(rows * n, 6);
  for (bool use_log : {false, true}) {
    auto loss = [&](const std::vector<double>& v) {
      std::vector<double> y(v.size());
      if (use_log)
        log_softmax_forward<double>(v.data(), y.data(), rows, n);
      else
        softmax_forward<double>(v.data(), y.data(), rows, n);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += w[i] * y[i];
      return l;
    };
    std::vector<double> y(x.size()), dx(x.size(), 0.0);
    if (use_log) {
      log_softmax_forward<double>(x.data(), y.data(), rows, n);
      log_softmax_backward<double>(y.data(), w.data(), dx.data(), rows, n);
    } else {
      softmax_forward<double>(x.data(), y.data(), rows, n);
      softmax_backward<double>(y.data(), w.data(), dx.data(), rows, n);
    }
    EXPECT_TRUE(test::gradient_close(dx, test::numeric_gradient(loss, x), use_log ? "log_softmax dx" : "softmax dx"));
  }
}

// The reference pairs in double: dx from the _backward_ref kernels (accumulating into a non-zero
// dx) against central differences of L = sum(w * f_ref(x)).
TEST(SoftmaxReferenceGradient, MatchesFiniteDifferences) {
  for (const RowsN& s : {RowsN{2, 7}, RowsN{3, 1}, RowsN{1, 3}}) {
    const int64_t total = s.rows * s.n;
    const std::vector<double> x = random_vector<double>(total, 7, 2.0), w = random_vector<double>(total, 8);
    const std::vector<double> init = random_vector<double>(total, 9);
    for (bool use_log : {false, true}) {
      auto loss = [&](const std::vector<double>& v) {
        std::vector<double> y(v.size());
        if (use_log)
          log_softmax_forward_ref<double>(v.data(), y.data(), s.rows, s.n);
        else
          softmax_forward_ref<double>(v.data(), y.data(), s.rows, s.n);
        double l = 0;
        for (size_t i = 0; i < y.size(); ++i) l += w[i] * y[i];
        return l;
      };
      std::vector<double> dx = init;
      if (use_log)
        log_softmax_backward_ref<double>(x.data(), w.data(), dx.data(), s.rows, s.n);
      else
        softmax_backward_ref<double>(x.data(), w.data(), dx.data(), s.rows, s.n);
      std::vector<double> numeric = test::numeric_gradient(loss, x);
      for (int64_t i = 0; i < total; ++i) numeric[i] += init[i];
      EXPECT_TRUE(test::gradient_close(dx, numeric,
                                       std::string(use_log ? "log_softmax" : "softmax") + "_backward_ref dx " +
                                           std::to_string(s.rows) + "x" + std::to_string(s.n)));
    }
  }
}

// Row 0 partly -inf: 0 (log: -inf) there, finite softmax elsewhere. Row 1 all -inf: NaN.
// Row 2: magnitudes of 1e4 (no overflow; exp(-2e4) underflows to exactly 0).
TYPED_TEST(Softmax, NegativeInfinityAndLargeMagnitudes) {
  using T = TypeParam;
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const int64_t rows = 3, n = 5;
  const std::vector<T> x = {-kInf,  T(1),    T(2),       -kInf, T(0),     // partly masked
                            -kInf,  -kInf,   -kInf,      -kInf, -kInf,    // fully masked
                            T(1e4), T(-1e4), T(1e4 - 1), T(0),  T(1e4)};  // large
  std::vector<T> y(rows * n), y_ref(rows * n), log_y(rows * n), log_y_ref(rows * n);
  softmax_forward<T>(x.data(), y.data(), rows, n);
  softmax_forward_ref<T>(x.data(), y_ref.data(), rows, n);
  log_softmax_forward<T>(x.data(), log_y.data(), rows, n);
  log_softmax_forward_ref<T>(x.data(), log_y_ref.data(), rows, n);
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), z = 1 + e1 + e2;
  const double big = 2 + std::exp(-1.0);  // the row-2 partition function relative to exp(1e4)
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> expected = {
      0, e1 / z, e2 / z, 0, 1 / z, nan, nan, nan, nan, nan, 1 / big, 0, std::exp(-1.0) / big, 0, 1 / big};
  const std::vector<double> log_expected = {-INFINITY,
                                            1 - std::log(z),
                                            2 - std::log(z),
                                            -INFINITY,
                                            -std::log(z),
                                            nan,
                                            nan,
                                            nan,
                                            nan,
                                            nan,
                                            -std::log(big),
                                            -2e4 - std::log(big),
                                            -1 - std::log(big),
                                            -1e4 - std::log(big),
                                            -std::log(big)};
  const double tol = test::tolerance_for<T>();
  EXPECT_TRUE(close(y, expected, tol, "softmax with -inf / large"));
  EXPECT_TRUE(close(y_ref, expected, tol, "softmax_ref with -inf / large"));
  EXPECT_TRUE(close(log_y, log_expected, tol, "log_softmax with -inf / large"));
  EXPECT_TRUE(close(log_y_ref, log_expected, tol, "log_softmax_ref with -inf / large"));

  // Backward through the partly masked and the large rows stays finite and matches the Jacobian.
  const std::vector<T> dy = {T(0.5), T(-1), T(2), T(3),  T(0.25), T(1), T(1), T(1),
                             T(1),   T(1),  T(1), T(-2), T(0.5),  T(4), T(-1)};
  std::vector<T> dx(rows * n, T(0)), log_dx(rows * n, T(0)), dx_ref(rows * n, T(0)), log_dx_ref(rows * n, T(0));
  softmax_backward<T>(y.data(), dy.data(), dx.data(), rows, n);
  log_softmax_backward<T>(log_y.data(), dy.data(), log_dx.data(), rows, n);
  softmax_backward_ref<T>(x.data(), dy.data(), dx_ref.data(), rows, n);
  log_softmax_backward_ref<T>(x.data(), dy.data(), log_dx_ref.data(), rows, n);
  // Absolute bound: the kernel tolerance times the size of the terms (|dy| <= 4, 5 of them).
  for (int64_t r : {0, 2}) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0, log_acc = 0;
      for (int64_t i = 0; i < n; ++i) {
        acc += dy[r * n + i] * expected[r * n + i] * ((i == j) - expected[r * n + j]);
        log_acc += dy[r * n + i] * ((i == j) - expected[r * n + j]);
      }
      EXPECT_NEAR(dx[r * n + j], acc, tol * 10) << "softmax dx row " << r << " col " << j;
      EXPECT_NEAR(log_dx[r * n + j], log_acc, tol * 10) << "log_softmax dx row " << r << " col " << j;
      EXPECT_NEAR(dx_ref[r * n + j], acc, tol * 10) << "softmax_backward_ref dx row " << r << " col " << j;
      EXPECT_NEAR(log_dx_ref[r * n + j], log_acc, tol * 10) << "log_softmax_backward_ref dx row " << r << " col " << j;
    }
  }
}

// Equal logits give log(1/2) whatever their magnitude (PyTorch: pytorch/pytorch#11752). Adding
// log(sum) to a large max before subtracting it again rounds the normaliser away in float.
TYPED_TEST(Softmax, LogSoftmaxKeepsNormaliserForLargeEqualLogits) {
  using T = TypeParam;
  for (double v : {1.0, 1e4, -1e4, 1e8}) {
    const std::vector<T> x = {static_cast<T>(v), static_cast<T>(v)};
    std::vector<T> y(2), p(2);
    log_softmax_forward<T>(x.data(), y.data(), 1, 2);
    softmax_forward<T>(x.data(), p.data(), 1, 2);
    const std::vector<double> log_half(2, -std::log(2.0));
    EXPECT_TRUE(close(y, log_half, test::tolerance_for<T>(), "log_softmax([v, v]) v=" + std::to_string(v)));
    EXPECT_TRUE(close(p, {0.5, 0.5}, test::tolerance_for<T>(), "softmax([v, v]) v=" + std::to_string(v)));
  }
}

TYPED_TEST(Softmax, RowsSumToOne) {
  using T = TypeParam;
  const int64_t rows = 100, n = 197;
  const std::vector<T> x = random_vector<T>(rows * n, 9, 10.0);
  std::vector<T> y(rows * n);
  softmax_forward<T>(x.data(), y.data(), rows, n);
  std::vector<double> sums(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) sums[r] += y[r * n + i];
  }
  EXPECT_TRUE(close(sums, std::vector<double>(rows, 1.0), test::tolerance_for<T>(), "softmax row sums"));
}

}  // namespace
}  // namespace vit::kernels
