// LayerNorm kernels: forward against layernorm_forward_ref and a naive double formula (with and
// without weight/bias, saved mean/rstd), backward against layernorm_backward_ref, accumulation
// into non-zero dx/dweight/dbias, and rows * n on both sides of the threading threshold (1 << 14
// elements), each float ISA path forced in turn (plain, AVX2, AVX-512); the kernel pair and the
// reference pair each against central differences in double.
#include "kernels/layernorm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

constexpr double kEps = 1e-5;

struct RowsN {
  int64_t rows, n;
};
// n from 1, 3, 7, 31, 33, 65, 197, 1000; 100x197 and 40x1000 are above the threshold, the rest below.
const std::vector<RowsN> kSizes = {{1, 1}, {3, 7}, {4, 197}, {100, 197}, {40, 1000}, {2, 33}, {5, 3}, {7, 31}, {3, 65}};

std::string size_str(const RowsN& s) { return " " + std::to_string(s.rows) + "x" + std::to_string(s.n); }

struct NaiveStats {
  std::vector<double> mean, rstd;
};
NaiveStats naive_stats(const std::vector<double>& x, int64_t rows, int64_t n) {
  NaiveStats st{std::vector<double>(rows), std::vector<double>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) m += x[r * n + i];
    m /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) v += (x[r * n + i] - m) * (x[r * n + i] - m);
    st.mean[r] = m;
    st.rstd[r] = 1.0 / std::sqrt(v / static_cast<double>(n) + kEps);
  }
  return st;
}

template <typename T>
class LayerNorm : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LayerNorm, Types);

TYPED_TEST(LayerNorm, ForwardMatchesReferenceAndNaive) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const RowsN& s : kSizes) {
      const int64_t total = s.rows * s.n;
      const std::vector<T> x = random_vector<T>(total, 1 + static_cast<uint64_t>(total), 2.0, 0.5);
      const std::vector<T> w = random_vector<T>(s.n, 2, 1.0, 1.0), b = random_vector<T>(s.n, 3);
      const NaiveStats st = naive_stats(to_double(x), s.rows, s.n);
      for (bool affine : {true, false}) {
        const T* wp = affine ? w.data() : nullptr;
        const T* bp = affine ? b.data() : nullptr;
        std::vector<T> y(total), y_ref(total), mean(s.rows), rstd(s.rows);
        layernorm_forward<T>(x.data(), wp, bp, y.data(), mean.data(), rstd.data(), s.rows, s.n, kEps);
        layernorm_forward_ref<T>(x.data(), wp, bp, y_ref.data(), s.rows, s.n, kEps);
        std::vector<double> expected(total);
        for (int64_t r = 0; r < s.rows; ++r) {
          for (int64_t i = 0; i < s.n; ++i) {
            const double xhat = (x[r * s.n + i] - st.mean[r]) * st.rstd[r];
            expected[r * s.n + i] = affine ? xhat * w[i] + b[i] : xhat;
          }
        }
        const std::string name = (affine ? " affine" : " plain") + size_str(s);
        const double tol = test::tolerance_for<T>();
        EXPECT_TRUE(close(y, to_double(y_ref), tol, "layernorm y vs ref" + name));
        EXPECT_TRUE(close(y, expected, tol, "layernorm y vs naive" + name));
        EXPECT_TRUE(close(y_ref, expected, tol, "layernorm_ref y vs naive" + name));
        EXPECT_TRUE(close(mean, st.mean, tol, "layernorm mean" + name));
        EXPECT_TRUE(close(rstd, st.rstd, tol, "layernorm rstd" + name));
      }
    }
  }
}

// Saved statistics are optional in forward.
TYPED_TEST(LayerNorm, ForwardWithoutSavedStatistics) {
  using T = TypeParam;
  const std::vector<T> x = random_vector<T>(3 * 7, 4);
  std::vector<T> y(21), y_ref(21);
  layernorm_forward<T>(x.data(), nullptr, nullptr, y.data(), nullptr, nullptr, 3, 7, kEps);
  layernorm_forward_ref<T>(x.data(), nullptr, nullptr, y_ref.data(), 3, 7, kEps);
  EXPECT_TRUE(close(y, to_double(y_ref), test::tolerance_for<T>(), "layernorm y (no mean/rstd)"));
}

// Backward against layernorm_backward_ref (run in double on the same values). Gradients start
// non-zero: the kernel must accumulate.
TYPED_TEST(LayerNorm, BackwardMatchesReferenceAndAccumulates) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const RowsN& s : kSizes) {
      const int64_t total = s.rows * s.n;
      const std::vector<T> x = random_vector<T>(total, 5 + static_cast<uint64_t>(total), 1.5, -0.3);
      const std::vector<T> dy = random_vector<T>(total, 6 + static_cast<uint64_t>(total));
      const std::vector<T> w = random_vector<T>(s.n, 7, 0.5, 1.0);
      for (bool affine : {true, false}) {
        const T* wp = affine ? w.data() : nullptr;
        std::vector<T> y(total), mean(s.rows), rstd(s.rows);
        layernorm_forward<T>(x.data(), wp, nullptr, y.data(), mean.data(), rstd.data(), s.rows, s.n, kEps);
        std::vector<T> dx = random_vector<T>(total, 8, 0.5), dw = random_vector<T>(s.n, 9),
                       db = random_vector<T>(s.n, 10);
        std::vector<double> edx = to_double(dx), edw = to_double(dw), edb = to_double(db);
        const std::vector<double> w_double = to_double(w);
        layernorm_backward_ref<double>(to_double(x).data(), affine ? w_double.data() : nullptr, to_double(dy).data(),
                                       edx.data(), edw.data(), edb.data(), s.rows, s.n, kEps);
        const NaiveStats st = naive_stats(to_double(x), s.rows, s.n);
        double dx_scale = 0;  // dx's natural magnitude rstd * |g|: its terms cancel (to 0 when n = 1)
        for (int64_t r = 0; r < s.rows; ++r) {
          for (int64_t i = 0; i < s.n; ++i) {
            const double g = dy[r * s.n + i] * (affine ? static_cast<double>(w[i]) : 1.0);
            dx_scale = std::max(dx_scale, st.rstd[r] * std::fabs(g));
          }
        }
        std::vector<T> dx_ref = dx, dw_ref = dw, db_ref = db;
        layernorm_backward<T>(x.data(), wp, mean.data(), rstd.data(), dy.data(), dx.data(), dw.data(), db.data(),
                              s.rows, s.n);
        const std::string name = (affine ? " affine" : " plain") + size_str(s);
        const double tol = test::tolerance_for<T>();
        EXPECT_TRUE(close(dx, edx, tol, "layernorm dx" + name, dx_scale));
        EXPECT_TRUE(close(dw, edw, tol, "layernorm dweight" + name));
        EXPECT_TRUE(close(db, edb, tol, "layernorm dbias" + name));
        // The reference in T agrees with itself in double.
        layernorm_backward_ref<T>(x.data(), wp, dy.data(), dx_ref.data(), dw_ref.data(), db_ref.data(), s.rows, s.n,
                                  kEps);
        EXPECT_TRUE(close(dx_ref, edx, tol, "layernorm_backward_ref dx" + name, dx_scale));
        EXPECT_TRUE(close(dw_ref, edw, tol, "layernorm_backward_ref dweight" + name));
        EXPECT_TRUE(close(db_ref, edb, tol, "layernorm_backward_ref dbias" + name));
      }
    }
  }
}

// Only some gradients requested: null dx (parameter gradients only) and null dweight/dbias.
TYPED_TEST(LayerNorm, BackwardWithNullGradients) {
  using T = TypeParam;
  for (const RowsN& s : {RowsN{3, 7}, RowsN{100, 197}}) {
    const int64_t total = s.rows * s.n;
    const std::vector<T> x = random_vector<T>(total, 11), dy = random_vector<T>(total, 12);
    const std::vector<T> w = random_vector<T>(s.n, 13, 0.5, 1.0);
    std::vector<T> y(total), mean(s.rows), rstd(s.rows);
    layernorm_forward<T>(x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), s.rows, s.n, kEps);
    std::vector<T> dx_all(total, T(0)), dw_all(s.n, T(0)), db_all(s.n, T(0));
    layernorm_backward<T>(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), dx_all.data(), dw_all.data(),
                          db_all.data(), s.rows, s.n);
    std::vector<T> dx(total, T(0)), dw(s.n, T(0)), db(s.n, T(0));
    layernorm_backward<T>(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), nullptr, dw.data(), db.data(),
                          s.rows, s.n);
    layernorm_backward<T>(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), dx.data(), nullptr, nullptr, s.rows,
                          s.n);
    EXPECT_TRUE(close(dx, to_double(dx_all), test::kExactTol, "layernorm dx alone" + size_str(s)));
    EXPECT_TRUE(close(dw, to_double(dw_all), test::kExactTol, "layernorm dweight alone" + size_str(s)));
    EXPECT_TRUE(close(db, to_double(db_all), test::kExactTol, "layernorm dbias alone" + size_str(s)));
  }
}

// The forward/backward pair in double against central differences of L = sum(c * y).
TEST(LayerNormGradient, MatchesFiniteDifferences) {
  const int64_t rows = 3, n = 5;
  const std::vector<double> x = random_vector<double>(rows * n, 14, 1.5, 0.2);
  const std::vector<double> w = random_vector<double>(n, 15, 0.5, 1.0), b = random_vector<double>(n, 16);
  const std::vector<double> c = random_vector<double>(rows * n, 17);
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv, const std::vector<double>& bv) {
    std::vector<double> y(rows * n);
    layernorm_forward<double>(xv.data(), wv.data(), bv.data(), y.data(), nullptr, nullptr, rows, n, kEps);
    double l = 0;
    for (int64_t i = 0; i < rows * n; ++i) l += c[i] * y[i];
    return l;
  };
  std::vector<double> y(rows * n), mean(rows), rstd(rows), dx(rows * n, 0.0), dw(n, 0.0), db(n, 0.0);
  layernorm_forward<double>(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, n, kEps);
  layernorm_backward<double>(x.data(), w.data(), mean.data(), rstd.data(), c.data(), dx.data(), dw.data(), db.data(),
                             rows, n);
  using V = std::vector<double>;
  EXPECT_TRUE(test::gradient_close(dx, test::numeric_gradient([&](const V& v) { return loss(v, w, b); }, x), "dx"));
  EXPECT_TRUE(test::gradient_close(dw, test::numeric_gradient([&](const V& v) { return loss(x, v, b); }, w), "dw"));
  EXPECT_TRUE(test::gradient_close(db, test::numeric_gradient([&](const V& v) { return loss(x, w, v); }, b), "db"));
}

// The reference pair in double: layernorm_backward_ref against central differences of
// L = sum(c * layernorm_forward_ref(x, w, b)), with and without weight/bias, accumulating, and
// with null gradients skipped.
TEST(LayerNormReferenceGradient, MatchesFiniteDifferences) {
  using V = std::vector<double>;
  for (const RowsN& s : {RowsN{3, 5}, RowsN{2, 1}, RowsN{1, 7}}) {
    const int64_t total = s.rows * s.n;
    const V x = random_vector<double>(total, 20 + static_cast<uint64_t>(total), 1.5, 0.2);
    const V w = random_vector<double>(s.n, 21, 0.5, 1.0), b = random_vector<double>(s.n, 22);
    const V c = random_vector<double>(total, 23);
    for (bool affine : {true, false}) {
      auto loss = [&](const V& xv, const V& wv, const V& bv) {
        V y(total);
        layernorm_forward_ref<double>(xv.data(), affine ? wv.data() : nullptr, affine ? bv.data() : nullptr, y.data(),
                                      s.rows, s.n, kEps);
        double l = 0;
        for (int64_t i = 0; i < total; ++i) l += c[i] * y[i];
        return l;
      };
      const V dx0 = random_vector<double>(total, 24), dw0 = random_vector<double>(s.n, 25),
              db0 = random_vector<double>(s.n, 26);
      V dx = dx0, dw = dw0, db = db0;
      layernorm_backward_ref<double>(x.data(), affine ? w.data() : nullptr, c.data(), dx.data(), dw.data(), db.data(),
                                     s.rows, s.n, kEps);
      V ndx = test::numeric_gradient([&](const V& v) { return loss(v, w, b); }, x);
      for (int64_t i = 0; i < total; ++i) ndx[i] += dx0[i];
      const std::string name = (affine ? " affine" : " plain") + size_str(s);
      EXPECT_TRUE(test::gradient_close(dx, ndx, "layernorm_backward_ref dx" + name));
      if (affine) {
        V ndw = test::numeric_gradient([&](const V& v) { return loss(x, v, b); }, w);
        V ndb = test::numeric_gradient([&](const V& v) { return loss(x, w, v); }, b);
        for (int64_t i = 0; i < s.n; ++i) {
          ndw[i] += dw0[i];
          ndb[i] += db0[i];
        }
        EXPECT_TRUE(test::gradient_close(dw, ndw, "layernorm_backward_ref dweight" + name));
        EXPECT_TRUE(test::gradient_close(db, ndb, "layernorm_backward_ref dbias" + name));
      }
      // Null gradients are skipped; the others are unchanged by their absence.
      V dx_only = dx0;
      layernorm_backward_ref<double>(x.data(), affine ? w.data() : nullptr, c.data(), dx_only.data(), nullptr, nullptr,
                                     s.rows, s.n, kEps);
      EXPECT_TRUE(close(dx_only, dx, test::kExactTol, "layernorm_backward_ref dx alone" + name));
    }
  }
}

// A constant row has variance 0: y = bias, finite (rstd = 1 / sqrt(eps)), and dx finite.
TYPED_TEST(LayerNorm, ConstantRowIsFinite) {
  using T = TypeParam;
  const int64_t n = 7;
  const std::vector<T> x(n, T(3.5)), w(n, T(2)), b = random_vector<T>(n, 18), dy = random_vector<T>(n, 19);
  std::vector<T> y(n), mean(1), rstd(1), dx(n, T(0));
  layernorm_forward<T>(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), 1, n, kEps);
  layernorm_backward<T>(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), dx.data(), nullptr, nullptr, 1, n);
  EXPECT_TRUE(close(y, to_double(b), test::tolerance_for<T>(), "layernorm constant row y"));
  EXPECT_NEAR(rstd[0], 1.0 / std::sqrt(kEps), test::tolerance_for<T>() / std::sqrt(kEps));
  for (T v : dx) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace vit::kernels
