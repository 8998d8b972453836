// Softmax cross-entropy against naive double formulas (label smoothing 0 and 0.1): loss,
// saved probabilities, backward (formula and central differences), large logits, accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernel_test_util.h"
#include "kernels/cross_entropy.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

struct NaiveCrossEntropy {
  double loss;
  std::vector<double> probs;
};

// loss = mean_r -sum_k q_k log p_k with q = (1 - eps) onehot(y) + eps / K.
NaiveCrossEntropy naive(const std::vector<double>& z, const std::vector<int64_t>& y, int64_t rows, int64_t K,
                        double eps) {
  NaiveCrossEntropy out{0.0, std::vector<double>(z.size())};
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t k = 0; k < K; ++k) m = std::max(m, z[r * K + k]);
    for (int64_t k = 0; k < K; ++k) sum += std::exp(z[r * K + k] - m);
    for (int64_t k = 0; k < K; ++k) {
      const double log_p = z[r * K + k] - m - std::log(sum);
      const double q = eps / static_cast<double>(K) + (k == y[r] ? 1.0 - eps : 0.0);
      out.probs[r * K + k] = std::exp(log_p);
      out.loss -= q * log_p / static_cast<double>(rows);
    }
  }
  return out;
}

std::vector<int64_t> random_targets(int64_t rows, int64_t K, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> t(rows);
  for (auto& v : t) v = static_cast<int64_t>(gen.integer(static_cast<uint64_t>(K)));
  return t;
}

struct Case {
  int64_t rows, classes;
  double logit_scale;
};
const std::vector<Case> kCases = {{5, 7, 2.0}, {3, 197, 3.0}, {1, 1, 1.0}, {33, 10, 1e4}, {4, 3, 50.0}};

template <typename T>
class CrossEntropy : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CrossEntropy, Types);

TYPED_TEST(CrossEntropy, ForwardAndBackwardMatchNaive) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    const int64_t total = c.rows * c.classes;
    const std::vector<T> logits = random_vector<T>(total, 1 + static_cast<uint64_t>(total), c.logit_scale);
    const std::vector<int64_t> targets = random_targets(c.rows, c.classes, 2);
    for (double eps : {0.0, 0.1}) {
      const NaiveCrossEntropy e = naive(to_double(logits), targets, c.rows, c.classes, eps);
      std::vector<T> probs(total);
      const double loss = cross_entropy_forward<T>(logits.data(), targets.data(), c.rows, c.classes, eps, probs.data());
      const std::string name = " R=" + std::to_string(c.rows) + " K=" + std::to_string(c.classes) +
                               " scale=" + std::to_string(c.logit_scale) + " eps=" + std::to_string(eps);
      const double tol = test::tolerance_for<T>();
      EXPECT_TRUE(std::isfinite(loss)) << name;
      EXPECT_NEAR(loss, e.loss, 1e-12 * (1 + std::fabs(e.loss))) << "loss" << name;  // double inside, both types
      EXPECT_TRUE(close(probs, e.probs, tol, "cross_entropy probs" + name));

      const double dloss = 0.7;
      std::vector<T> dlogits = random_vector<T>(total, 3, 0.5);  // non-zero: backward accumulates
      std::vector<double> expected = to_double(dlogits);
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t k = 0; k < c.classes; ++k) {
          const double q = eps / static_cast<double>(c.classes) + (k == targets[r] ? 1.0 - eps : 0.0);
          expected[r * c.classes + k] += dloss / static_cast<double>(c.rows) * (e.probs[r * c.classes + k] - q);
        }
      }
      cross_entropy_backward<T>(probs.data(), targets.data(), c.rows, c.classes, eps, dloss, dlogits.data());
      EXPECT_TRUE(close(dlogits, expected, tol, "cross_entropy dlogits" + name));
    }
  }
}

// The forward/backward pair in double against central differences of the loss.
TEST(CrossEntropyGradient, MatchesFiniteDifferences) {
  const int64_t rows = 4, K = 6;
  const std::vector<double> logits = random_vector<double>(rows * K, 4, 2.0);
  const std::vector<int64_t> targets = random_targets(rows, K, 5);
  for (double eps : {0.0, 0.1}) {
    auto loss = [&](const std::vector<double>& z) {
      std::vector<double> p(rows * K);
      return cross_entropy_forward<double>(z.data(), targets.data(), rows, K, eps, p.data());
    };
    std::vector<double> probs(rows * K), dlogits(rows * K, 0.0);
    cross_entropy_forward<double>(logits.data(), targets.data(), rows, K, eps, probs.data());
    cross_entropy_backward<double>(probs.data(), targets.data(), rows, K, eps, 1.0, dlogits.data());
    EXPECT_TRUE(test::gradient_close(dlogits, test::numeric_gradient(loss, logits),
                                     "cross_entropy dlogits eps=" + std::to_string(eps)));
  }
}

// Hand-checked values: uniform logits give log K whatever the smoothing; a confident correct
// prediction costs ~0 without smoothing.
TEST(CrossEntropy, KnownValues) {
  const std::vector<double> uniform(2 * 4, 3.0);
  const std::vector<int64_t> targets = {1, 3};
  std::vector<double> probs(8);
  EXPECT_NEAR(cross_entropy_forward<double>(uniform.data(), targets.data(), 2, 4, 0.0, probs.data()), std::log(4.0),
              1e-15);
  EXPECT_NEAR(cross_entropy_forward<double>(uniform.data(), targets.data(), 2, 4, 0.1, probs.data()), std::log(4.0),
              1e-15);
  const std::vector<double> confident = {0, 100, 0, 0};
  EXPECT_NEAR(cross_entropy_forward<double>(confident.data(), targets.data(), 1, 4, 0.0, probs.data()), 0.0, 1e-15);
  // Smoothing 0.1: loss = -(0.9 + 0.1/4) log p_1 - 0.1/4 * 3 log p_other = 0.075 * 100 (+ ~0).
  EXPECT_NEAR(cross_entropy_forward<double>(confident.data(), targets.data(), 1, 4, 0.1, probs.data()), 7.5, 1e-12);
}

TEST(CrossEntropy, NoRowsGiveNaN) {
  std::vector<float> logits, probs;
  std::vector<int64_t> targets;
  EXPECT_TRUE(std::isnan(cross_entropy_forward<float>(logits.data(), targets.data(), 0, 5, 0.0, probs.data())));
}

}  // namespace
}  // namespace vit::kernels
