// The step's finiteness checks and its one gradient norm (train/health.h): the norm the check
// computes is optim::grad_norm's, bit for bit, so clipping with it scales the gradients exactly
// as clip_grad_norm does; the parameter named is the one backpropagation reached first (the last
// in model order); a non-finite loss or gradient is a reason to skip the step, finite ones none.
#include "train/health.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace vit::train {
namespace {

Variable with_grad(std::vector<float> grad) {
  const auto n = static_cast<int64_t>(grad.size());
  Variable v(Tensor::full({n}, 0.5f), true);
  v.set_grad(Tensor::from_data(std::move(grad), {n}));
  return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Health, OneNormForTheCheckAndTheClipping) {
  // Values whose sum of squares rounds differently in other orders or precisions.
  const optim::NamedParameters ps = {{"patch_embed.proj.weight", with_grad({0.1f, 1e-4f, 3.3f, -7.7f, 1e3f})},
                                     {"cls_token", with_grad({1.0f / 3.0f})},
                                     {"head.weight", with_grad({-2.2f, 0.7f, 1e-7f})}};
  const GradientNorms grads = gradient_norms(ps);
  ASSERT_EQ(grads.squares.size(), 3u);
  EXPECT_TRUE(same_bits(grads.norm, optim::grad_norm(ps)));
  EXPECT_DOUBLE_EQ(grads.squares[1], static_cast<double>(1.0f / 3.0f) * static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(first_nonfinite_grad(ps, grads), "");
  EXPECT_EQ(step_problem(0.5, ps, grads), "");
  // Clipping with the given norm scales exactly as clip_grad_norm does.
  const optim::NamedParameters copy = {{"a", with_grad({0.1f, 1e-4f, 3.3f, -7.7f, 1e3f})},
                                       {"b", with_grad({1.0f / 3.0f})},
                                       {"c", with_grad({-2.2f, 0.7f, 1e-7f})}};
  optim::clip_grad_norm(ps, 1.0, grads.norm);
  EXPECT_TRUE(same_bits(optim::clip_grad_norm(copy, 1.0), grads.norm));
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(ps[i].second.grad().to_vector(), copy[i].second.grad().to_vector()) << ps[i].first;
  }
}

TEST(Health, NamesTheGradientThatWentNonFiniteFirstInBackpropagation) {
  const optim::NamedParameters ps = {{"patch_embed.proj.weight", with_grad({NAN, 1.0f})},
                                     {"blocks.0.attn.qkv.weight", with_grad({INFINITY})},
                                     {"head.weight", with_grad({1.0f})}};
  const GradientNorms grads = gradient_norms(ps);
  EXPECT_FALSE(std::isfinite(grads.norm));
  EXPECT_EQ(first_nonfinite_grad(ps, grads), "blocks.0.attn.qkv.weight");
  EXPECT_EQ(step_problem(0.5, ps, grads),
            "gradient of 'blocks.0.attn.qkv.weight' went non-finite first in backpropagation (loss 0.5)");
  EXPECT_NE(step_problem(NAN, ps, grads).find("loss is nan"), std::string::npos);
  EXPECT_THROW(first_nonfinite_grad(ps, GradientNorms{}), Error);
}

}  // namespace
}  // namespace vit::train
