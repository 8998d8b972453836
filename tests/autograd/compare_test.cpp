// Elementwise comparisons with broadcasting (torch.eq ... torch.ge), as 0/1 tensors.
#include "autograd/compare.h"

#include <gtest/gtest.h>

#include <cmath>

namespace vit {
namespace {

using kernels::Compare;

TEST(Compare, BroadcastsAndAnswersOneOrZero) {
  const Tensor a = Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_data(std::vector<float>{1, 5, 3}, {3});
  EXPECT_EQ(compare(Compare::Eq, a, b).to_vector(), (std::vector<double>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(compare(Compare::Ne, a, b).to_vector(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(compare(Compare::Lt, a, b).to_vector(), (std::vector<double>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(compare(Compare::Le, a, b).to_vector(), (std::vector<double>{1, 1, 1, 0, 1, 0}));
  EXPECT_EQ(compare(Compare::Gt, a, b).to_vector(), (std::vector<double>{0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(compare(Compare::Ge, b, a).to_vector(), (std::vector<double>{1, 1, 1, 0, 1, 0}));
  EXPECT_EQ(compare(Compare::Eq, a, b).shape(), (Shape{2, 3}));
  EXPECT_EQ(compare(Compare::Gt, Tensor::scalar(2.0), Tensor::scalar(1.0)).item(), 1.0);
}

TEST(Compare, NanIsUnequalToEverythingAndTheDtypeIsKept) {
  const Tensor a = Tensor::from_data(std::vector<double>{NAN, 1.0}, {2});
  EXPECT_EQ(compare(Compare::Eq, a, a).to_vector(), (std::vector<double>{0, 1}));
  EXPECT_EQ(compare(Compare::Ne, a, a).to_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(compare(Compare::Eq, a, a).dtype(), DType::F64);
}

TEST(Compare, RefusesShapesThatDoNotBroadcastAndMixedDtypes) {
  EXPECT_THROW(compare(Compare::Eq, Tensor::zeros({2, 3}), Tensor::zeros({2})), Error);
  EXPECT_THROW(compare(Compare::Eq, Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)), Error);
}

}  // namespace
}  // namespace vit
