// Softmax cross-entropy against cross_entropy_forward_ref / cross_entropy_backward_ref (label
// smoothing 0 and 0.1) on awkward sizes: loss, saved probabilities, backward, large logits,
// accumulation; the kernel pair and the reference pair against central differences, and both
// forwards against hand-checked values.
#include "kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

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
// Rows and classes from 1, 3, 7, 31, 33, 65, 197; logits from moderate to 1e4 (saturated).
const std::vector<Case> kCases = {{5, 7, 2.0},   {3, 197, 3.0}, {1, 1, 1.0},   {33, 10, 1e4}, {4, 3, 50.0},
                                  {31, 65, 2.0}, {65, 31, 1.0}, {197, 3, 2.0}, {7, 33, 300.0}};

template <typename T>
class CrossEntropy : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CrossEntropy, Types);

TYPED_TEST(CrossEntropy, ForwardAndBackwardMatchReference) {
  using T = TypeParam;
  for (const Case& c : kCases) {
    const int64_t total = c.rows * c.classes;
    const std::vector<T> logits = random_vector<T>(total, 1 + static_cast<uint64_t>(total), c.logit_scale);
    const std::vector<int64_t> targets = random_targets(c.rows, c.classes, 2);
    for (double eps : {0.0, 0.1}) {
      // The references run in double on the same values.
      const std::vector<double> logits_double = to_double(logits);
      std::vector<double> expected_probs(total);
      const double expected_loss = cross_entropy_forward_ref<double>(logits_double.data(), targets.data(), c.rows,
                                                                     c.classes, eps, expected_probs.data());
      std::vector<T> probs(total);
      const double loss = cross_entropy_forward<T>(logits.data(), targets.data(), c.rows, c.classes, eps, probs.data());
      const std::string name = " R=" + std::to_string(c.rows) + " K=" + std::to_string(c.classes) +
                               " scale=" + std::to_string(c.logit_scale) + " eps=" + std::to_string(eps);
      const double tol = test::tolerance_for<T>();
      EXPECT_TRUE(std::isfinite(loss)) << name;
      // The loss is computed in double inside the kernel, for both types.
      EXPECT_NEAR(loss, expected_loss, test::kDoubleFormulaTol * (1 + std::fabs(expected_loss))) << "loss" << name;
      EXPECT_TRUE(close(probs, expected_probs, tol, "cross_entropy probs" + name));
      std::vector<T> probs_ref(total);
      const double loss_ref =
          cross_entropy_forward_ref<T>(logits.data(), targets.data(), c.rows, c.classes, eps, probs_ref.data());
      EXPECT_NEAR(loss_ref, expected_loss, test::kDoubleFormulaTol * (1 + std::fabs(expected_loss)))
          << "loss_ref" << name;
      EXPECT_TRUE(close(probs_ref, expected_probs, tol, "cross_entropy_forward_ref probs" + name));

      const double dloss = 0.7;
      std::vector<T> dlogits = random_vector<T>(total, 3, 0.5);  // non-zero: backward accumulates
      std::vector<T> dlogits_ref = dlogits;
      std::vector<double> expected = to_double(dlogits);
      cross_entropy_backward_ref<double>(logits_double.data(), targets.data(), c.rows, c.classes, eps, dloss,
                                         expected.data());
      cross_entropy_backward<T>(probs.data(), targets.data(), c.rows, c.classes, eps, dloss, dlogits.data());
      EXPECT_TRUE(close(dlogits, expected, tol, "cross_entropy dlogits" + name));
      cross_entropy_backward_ref<T>(logits.data(), targets.data(), c.rows, c.classes, eps, dloss, dlogits_ref.data());
      EXPECT_TRUE(close(dlogits_ref, expected, tol, "cross_entropy_backward_ref dlogits" + name));
    }
  }
}

// The reference pair in double: cross_entropy_backward_ref (accumulating into non-zero
// dlogits, dloss != 1) against central differences of dloss * cross_entropy_forward_ref.
TEST(CrossEntropyReferenceGradient, MatchesFiniteDifferences) {
  for (const Case& c : {Case{4, 6, 2.0}, Case{1, 1, 1.0}, Case{3, 7, 5.0}}) {
    const int64_t total = c.rows * c.classes;
    const std::vector<double> logits = random_vector<double>(total, 6, c.logit_scale);
    const std::vector<int64_t> targets = random_targets(c.rows, c.classes, 7);
    const double dloss = 1.3;
    for (double eps : {0.0, 0.1}) {
      auto loss = [&](const std::vector<double>& z) {
        std::vector<double> p(total);
        return dloss * cross_entropy_forward_ref<double>(z.data(), targets.data(), c.rows, c.classes, eps, p.data());
      };
      const std::vector<double> init = random_vector<double>(total, 8);
      std::vector<double> dlogits = init;
      cross_entropy_backward_ref<double>(logits.data(), targets.data(), c.rows, c.classes, eps, dloss, dlogits.data());
      std::vector<double> numeric = test::numeric_gradient(loss, logits);
      for (int64_t i = 0; i < total; ++i) numeric[i] += init[i];
      EXPECT_TRUE(test::gradient_close(dlogits, numeric,
                                       "cross_entropy_backward_ref dlogits R=" + std::to_string(c.rows) +
                                           " K=" + std::to_string(c.classes) + " eps=" + std::to_string(eps)));
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

// Hand-checked values, for the kernel and the reference: uniform logits give log K whatever the
// smoothing; a confident correct prediction costs ~0 without smoothing.
TEST(CrossEntropy, KnownValues) {
  using Forward = double (*)(const double*, const int64_t*, int64_t, int64_t, double, double*);
  for (Forward forward : {&cross_entropy_forward<double>, &cross_entropy_forward_ref<double>}) {
    const std::vector<double> uniform(2 * 4, 3.0);
    const std::vector<int64_t> targets = {1, 3};
    std::vector<double> probs(8);
    EXPECT_NEAR(forward(uniform.data(), targets.data(), 2, 4, 0.0, probs.data()), std::log(4.0), test::kDoubleUlpTol);
    EXPECT_NEAR(forward(uniform.data(), targets.data(), 2, 4, 0.1, probs.data()), std::log(4.0), test::kDoubleUlpTol);
    const std::vector<double> confident = {0, 100, 0, 0};
    EXPECT_NEAR(forward(confident.data(), targets.data(), 1, 4, 0.0, probs.data()), 0.0, test::kDoubleUlpTol);
    // Smoothing 0.1: loss = -(0.9 + 0.1/4) log p_1 - 0.1/4 * 3 log p_other = 0.075 * 100 (+ ~0).
    EXPECT_NEAR(forward(confident.data(), targets.data(), 1, 4, 0.1, probs.data()), 7.5, test::kDoubleFormulaTol);
  }
}

TEST(CrossEntropy, NoRowsGiveNaN) {
  std::vector<float> logits, probs;
  std::vector<int64_t> targets;
  EXPECT_TRUE(std::isnan(cross_entropy_forward<float>(logits.data(), targets.data(), 0, 5, 0.0, probs.data())));
  EXPECT_TRUE(std::isnan(cross_entropy_forward_ref<float>(logits.data(), targets.data(), 0, 5, 0.0, probs.data())));
}

}  // namespace
}  // namespace vit::kernels
