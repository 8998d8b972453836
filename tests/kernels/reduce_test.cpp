// Row reductions against naive double loops: sum_rows, max_rows (NaN wins, first index on ties),
// moments_rows (unbiased and population; n - correction <= 0 gives NaN), moments_backward
// (formula and central differences) and scatter_rows_add.
#include "kernels/reduce.h"

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
// (2, 40000) and (197, 197) take the threaded paths; (1, 40000) is one long row.
const std::vector<RowsN> kSizes = {{1, 1}, {3, 7}, {197, 33}, {2, 40000}, {1, 40000}, {197, 197}, {65, 31}};

std::string size_str(const RowsN& s) { return " " + std::to_string(s.rows) + "x" + std::to_string(s.n); }

template <typename T>
class Reduce : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Reduce, Types);

TYPED_TEST(Reduce, SumRowsMatchesNaive) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    const std::vector<T> x = random_vector<T>(s.rows * s.n, 1 + static_cast<uint64_t>(s.n), 1.0, 0.25);
    std::vector<T> y(s.rows);
    sum_rows<T>(x.data(), s.rows, s.n, y.data());
    std::vector<double> expected(s.rows, 0.0);
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t i = 0; i < s.n; ++i) expected[r] += x[r * s.n + i];
    }
    EXPECT_TRUE(close(y, expected, test::tolerance_for<T>(), "sum_rows" + size_str(s)));
  }
}

TYPED_TEST(Reduce, MaxRowsMatchesNaive) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    const std::vector<T> x = random_vector<T>(s.rows * s.n, 2 + static_cast<uint64_t>(s.n));
    std::vector<T> y(s.rows);
    std::vector<int64_t> index(s.rows, -1);
    max_rows<T>(x.data(), s.rows, s.n, y.data(), index.data());
    for (int64_t r = 0; r < s.rows; ++r) {
      int64_t best = 0;
      for (int64_t i = 1; i < s.n; ++i) {
        if (x[r * s.n + i] > x[r * s.n + best]) best = i;
      }
      ASSERT_EQ(index[r], best) << "max_rows index row " << r << size_str(s);
      ASSERT_EQ(y[r], x[r * s.n + best]) << "max_rows value row " << r << size_str(s);
    }
  }
}

TYPED_TEST(Reduce, MaxRowsNaNWinsAndTiesTakeFirstIndex) {
  using T = TypeParam;
  constexpr T kNaN = std::numeric_limits<T>::quiet_NaN(), kInf = std::numeric_limits<T>::infinity();
  const int64_t n = 5;
  const std::vector<T> x = {T(1),  kNaN,  T(5),  kNaN,  T(2),   // NaN wins, first NaN
                            kNaN,  T(9),  T(1),  T(0),  T(3),   // NaN first
                            T(2),  T(7),  T(7),  T(1),  T(7),   // ties: first
                            -kInf, -kInf, -kInf, -kInf, -kInf,  // all -inf
                            T(-3), T(-1), kInf,  T(4),  kInf};  // +inf, tie
  const int64_t rows = static_cast<int64_t>(x.size()) / n;
  std::vector<T> y(rows);
  std::vector<int64_t> index(rows, -1);
  max_rows<T>(x.data(), rows, n, y.data(), index.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(index[0], 1);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(index[1], 0);
  EXPECT_EQ(y[2], T(7));
  EXPECT_EQ(index[2], 1);
  EXPECT_EQ(y[3], -kInf);
  EXPECT_EQ(index[3], 0);
  EXPECT_EQ(y[4], kInf);
  EXPECT_EQ(index[4], 2);
  // A null index pointer is allowed (values only).
  std::vector<T> y2(rows);
  max_rows<T>(x.data(), rows, n, y2.data(), nullptr);
  EXPECT_EQ(y2[2], T(7));
}

TYPED_TEST(Reduce, MomentsMatchNaive) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    if (s.n < 3) continue;
    const std::vector<T> x = random_vector<T>(s.rows * s.n, 3 + static_cast<uint64_t>(s.n), 2.0, 1.5);
    for (int64_t correction : {0, 1}) {
      std::vector<T> mean(s.rows), var(s.rows);
      moments_rows<T>(x.data(), s.rows, s.n, correction, mean.data(), var.data());
      std::vector<double> em(s.rows, 0.0), ev(s.rows, 0.0);
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t i = 0; i < s.n; ++i) em[r] += x[r * s.n + i];
        em[r] /= static_cast<double>(s.n);
        for (int64_t i = 0; i < s.n; ++i) ev[r] += (x[r * s.n + i] - em[r]) * (x[r * s.n + i] - em[r]);
        ev[r] /= static_cast<double>(s.n - correction);
      }
      const std::string name = " correction=" + std::to_string(correction) + size_str(s);
      EXPECT_TRUE(close(mean, em, test::tolerance_for<T>(), "moments mean" + name));
      EXPECT_TRUE(close(var, ev, test::tolerance_for<T>(), "moments var" + name));
    }
  }
}

// Two-pass variance: a large offset does not cancel the variance away.
TEST(ReduceMoments, LargeOffsetKeepsVariance) {
  const int64_t n = 1000;
  std::vector<double> x = random_vector<double>(n, 4, 1e-3, 1e6);
  std::vector<double> mean(1), var(1);
  moments_rows<double>(x.data(), 1, n, 1, mean.data(), var.data());
  double m = 0, v = 0;
  for (double e : x) m += e / n;
  for (double e : x) v += (e - m) * (e - m) / (n - 1);
  EXPECT_NEAR(var[0], v, test::kLargeOffsetVarianceTol * v);
  EXPECT_NEAR(mean[0], m, test::kDoubleFormulaTol * m);
}

TYPED_TEST(Reduce, MomentsWithNoDegreesOfFreedomGiveNaN) {
  using T = TypeParam;
  const std::vector<T> x = {T(2.5), T(-1), T(4)};
  std::vector<T> mean(3), var(3);
  moments_rows<T>(x.data(), 3, 1, 1, mean.data(), var.data());  // n = 1, unbiased
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(mean[r], x[r]);
    EXPECT_TRUE(std::isnan(var[r])) << "row " << r << " var " << var[r];
  }
  moments_rows<T>(x.data(), 1, 3, 3, mean.data(), var.data());  // n - correction = 0
  EXPECT_TRUE(std::isnan(var[0]));
  moments_rows<T>(x.data(), 1, 3, 5, mean.data(), var.data());  // n - correction < 0
  EXPECT_TRUE(std::isnan(var[0]));
  moments_rows<T>(x.data(), 3, 1, 0, mean.data(), var.data());  // population variance of one value
  for (int r = 0; r < 3; ++r) EXPECT_EQ(var[r], T(0));
}

TYPED_TEST(Reduce, MomentsBackwardMatchesFormulaAndAccumulates) {
  using T = TypeParam;
  for (const RowsN& s : kSizes) {
    if (s.n < 3) continue;
    const std::vector<T> x = random_vector<T>(s.rows * s.n, 5 + static_cast<uint64_t>(s.n), 1.0, -0.5);
    const std::vector<T> dvar = random_vector<T>(s.rows, 6);
    for (int64_t correction : {0, 1}) {
      std::vector<T> mean(s.rows), var(s.rows);
      moments_rows<T>(x.data(), s.rows, s.n, correction, mean.data(), var.data());
      std::vector<T> dx = random_vector<T>(s.rows * s.n, 7, 0.5);
      std::vector<double> expected = to_double(dx);
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t i = 0; i < s.n; ++i) {
          expected[r * s.n + i] +=
              2.0 * dvar[r] * (x[r * s.n + i] - static_cast<double>(mean[r])) / static_cast<double>(s.n - correction);
        }
      }
      moments_backward<T>(x.data(), mean.data(), dvar.data(), s.rows, s.n, correction, dx.data());
      EXPECT_TRUE(close(dx, expected, test::tolerance_for<T>(),
                        "moments_backward correction=" + std::to_string(correction) + size_str(s)));
    }
  }
}

// The variance's gradient by central differences (mean's dependence on x included).
TEST(ReduceMoments, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, n = 6;
  const std::vector<double> x = random_vector<double>(rows * n, 8), dvar = random_vector<double>(rows, 9);
  for (int64_t correction : {0, 1}) {
    auto loss = [&](const std::vector<double>& v) {
      std::vector<double> mean(rows), var(rows);
      moments_rows<double>(v.data(), rows, n, correction, mean.data(), var.data());
      double l = 0;
      for (int64_t r = 0; r < rows; ++r) l += dvar[r] * var[r];
      return l;
    };
    std::vector<double> mean(rows), var(rows), dx(rows * n, 0.0);
    moments_rows<double>(x.data(), rows, n, correction, mean.data(), var.data());
    moments_backward<double>(x.data(), mean.data(), dvar.data(), rows, n, correction, dx.data());
    EXPECT_TRUE(test::gradient_close(dx, test::numeric_gradient(loss, x),
                                     "moments dx correction=" + std::to_string(correction)));
  }
}

TYPED_TEST(Reduce, ScatterRowsAddAccumulatesAtIndex) {
  using T = TypeParam;
  const int64_t rows = 4, n = 5;
  const std::vector<T> dy = {T(1.5), T(-2), T(3), T(0.25)};
  const std::vector<int64_t> index = {0, 4, 2, 2};
  std::vector<T> dx = random_vector<T>(rows * n, 10);
  std::vector<double> expected = to_double(dx);
  for (int64_t r = 0; r < rows; ++r) expected[r * n + index[r]] += dy[r];
  const std::vector<T> before = dx;
  scatter_rows_add<T>(dy.data(), index.data(), rows, n, dx.data());
  EXPECT_TRUE(close(dx, expected, test::tolerance_for<T>(), "scatter_rows_add"));
  for (int64_t i = 0; i < rows * n; ++i) {
    const bool touched = i == 0 * n + 0 || i == 1 * n + 4 || i == 2 * n + 2 || i == 3 * n + 2;
    if (!touched) {
      EXPECT_EQ(dx[i], before[i]) << "untouched element " << i;
    }
  }
}

// max_rows + scatter_rows_add is the max's gradient: central differences agree away from ties.
TEST(ReduceMax, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, n = 7;
  const std::vector<double> x = random_vector<double>(rows * n, 11), dy = random_vector<double>(rows, 12);
  auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(rows);
    max_rows<double>(v.data(), rows, n, y.data(), nullptr);
    double l = 0;
    for (int64_t r = 0; r < rows; ++r) l += dy[r] * y[r];
    return l;
  };
  std::vector<double> y(rows), dx(rows * n, 0.0);
  std::vector<int64_t> index(rows);
  max_rows<double>(x.data(), rows, n, y.data(), index.data());
  scatter_rows_add<double>(dy.data(), index.data(), rows, n, dx.data());
  EXPECT_TRUE(test::gradient_close(dx, test::numeric_gradient(loss, x), "max dx"));
}

}  // namespace
}  // namespace vit::kernels
