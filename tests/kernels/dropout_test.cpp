// Inverted-dropout masks: values only 0 or 1 / (1 - p), dropped fraction near p, mean near 1,
// p = 0 keeps all, p = 1 drops all, a seed fixes the mask (same for float and double).
#include "kernels/dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/random.h"
#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

constexpr int64_t kSamples = 100000;

template <typename T>
class Dropout : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Dropout, Types);

TYPED_TEST(Dropout, ValuesAndDroppedFraction) {
  using T = TypeParam;
  for (double p : {0.1, 0.25, 0.5, 0.9}) {
    std::vector<T> mask(kSamples, T(-1));
    Generator gen(42);
    dropout_mask<T>(mask.data(), kSamples, p, gen);
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    int64_t dropped = 0;
    double sum = 0;
    for (T m : mask) {
      ASSERT_TRUE(m == T(0) || m == keep) << "p=" << p << " mask value " << m;
      dropped += m == T(0);
      sum += m;
    }
    const double fraction = static_cast<double>(dropped) / kSamples;
    const double sigma = std::sqrt(p * (1 - p) / kSamples);
    EXPECT_NEAR(fraction, p, test::kSamplingSigmas * sigma) << "dropped fraction for p=" << p;
    // E[mask] = 1 (inverted dropout keeps the expected activation).
    EXPECT_NEAR(sum / kSamples, 1.0, test::kSamplingSigmas * sigma / (1 - p)) << "mean mask for p=" << p;
  }
}

TYPED_TEST(Dropout, ZeroKeepsAllAndOneDropsAll) {
  using T = TypeParam;
  std::vector<T> mask(1000, T(-1));
  Generator gen(1);
  dropout_mask<T>(mask.data(), 1000, 0.0, gen);
  for (T m : mask) ASSERT_EQ(m, T(1));
  dropout_mask<T>(mask.data(), 1000, 1.0, gen);
  for (T m : mask) ASSERT_EQ(m, T(0));
}

TYPED_TEST(Dropout, SameSeedSameMask) {
  using T = TypeParam;
  std::vector<T> a(5000), b(5000), c(5000);
  Generator ga(7), gb(7), gc(8);
  dropout_mask<T>(a.data(), 5000, 0.3, ga);
  dropout_mask<T>(b.data(), 5000, 0.3, gb);
  dropout_mask<T>(c.data(), 5000, 0.3, gc);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Drawing continues the stream: a second mask from the same generator differs from the first.
  dropout_mask<T>(b.data(), 5000, 0.3, gb);
  EXPECT_NE(a, b);
}

TEST(Dropout, FloatAndDoubleMasksAgreeForOneSeed) {
  std::vector<float> f(2000);
  std::vector<double> d(2000);
  Generator gf(3), gd(3);
  dropout_mask<float>(f.data(), 2000, 0.2, gf);
  dropout_mask<double>(d.data(), 2000, 0.2, gd);
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i] == 0.0f, d[i] == 0.0) << "element " << i;
}

}  // namespace
}  // namespace vit::kernels
