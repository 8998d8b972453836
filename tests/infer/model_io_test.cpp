// infer/model_io.h: the input check and the class scores `vit predict`, `vit serve` and the library share.
#include "infer/model_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/check.h"

namespace vit::infer {
namespace {

TEST(ModelIo, TopKIsTheSoftmaxInOrderWithTiesToTheLowerIndex) {
  const float logits[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<ClassScore> top = top_k_softmax(logits, 5, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].index, 1);  // 3.0 twice: the lower index first
  EXPECT_EQ(top[1].index, 3);
  EXPECT_EQ(top[2].index, 0);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v));
  EXPECT_NEAR(top[0].probability, std::exp(3.0) / sum, 1e-15);
  EXPECT_NEAR(top[2].probability, std::exp(1.0) / sum, 1e-15);
  // k beyond the classes: all of them; huge logits do not overflow.
  const float big[2] = {1000.0f, 999.0f};
  const std::vector<ClassScore> all = top_k_softmax(big, 2, 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_NEAR(all[0].probability + all[1].probability, 1.0, 1e-15);
  EXPECT_NEAR(all[0].probability, 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_THROW(top_k_softmax(logits, 0, 1), Error);
  EXPECT_THROW(top_k_softmax(logits, 5, 0), Error);
}

TEST(ModelIo, TheFirstNonFiniteInputIsNamed) {
  float x[4] = {0.0f, 1.0f, 2.0f, 3.0f};
  EXPECT_NO_THROW(check_finite_input(x, 4, "predict", "the input"));
  x[2] = std::numeric_limits<float>::infinity();
  x[3] = NAN;
  try {
    check_finite_input(x, 4, "predict", "x.npy: the input");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[predict] x.npy: the input contains NaN or infinity (element 2 of 4)");
  }
}

}  // namespace
}  // namespace vit::infer
