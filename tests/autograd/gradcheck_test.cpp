// Finite-difference gradient checks in float64 for every differentiable op.
#include "support/gradcheck.h"

#include <gtest/gtest.h>

namespace vit {
namespace {

using testing::gradcheck;
using testing::random_f64;
using V = std::vector<Variable>;

TEST(Gradcheck, BroadcastArithmetic) {
  const Tensor a = random_f64({2, 3, 4}, 1), b = random_f64({3, 1}, 2), c = random_f64({4}, 3, 0.5, 2.0);
  EXPECT_GRADCHECK([](const V& v) { return v[0] + v[1]; }, {a, b});
  EXPECT_GRADCHECK([](const V& v) { return v[0] - v[1]; }, {a, b});
  EXPECT_GRADCHECK([](const V& v) { return v[0] * v[1]; }, {a, b});
  EXPECT_GRADCHECK([](const V& v) { return v[0] / v[1]; }, {a, c});
  EXPECT_GRADCHECK([](const V& v) { return v[1] / v[0]; }, {c, a});
  EXPECT_GRADCHECK([](const V& v) { return (v[0] * 2.0 + 1.0) - 3.0 / v[1] - (1.0 - v[0]) / 4.0; }, {c, c});
  EXPECT_GRADCHECK([](const V& v) { return -v[0]; }, {a});
}

TEST(Gradcheck, UnaryFunctions) {
  const Tensor x = random_f64({3, 7}, 4, 2.0);
  const Tensor positive = random_f64({3, 7}, 5, 0.3, 2.0);
  EXPECT_GRADCHECK([](const V& v) { return exp(v[0]); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return log(v[0]); }, {positive});
  EXPECT_GRADCHECK([](const V& v) { return sqrt(v[0]); }, {positive});
  EXPECT_GRADCHECK([](const V& v) { return pow(v[0], 3.0); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return pow(v[0], -1.5); }, {positive});
  EXPECT_GRADCHECK([](const V& v) { return tanh(v[0]); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return sigmoid(v[0]); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return gelu(v[0]); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return gelu(v[0], true); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return relu(v[0]); }, {x});  // random x avoids the kink at 0
  EXPECT_GRADCHECK([](const V& v) { return abs(v[0]); }, {x});
}

TEST(Gradcheck, Reductions) {
  const Tensor x = random_f64({3, 4, 5}, 6);
  EXPECT_GRADCHECK([](const V& v) { return v[0].sum(); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].sum({0, 2}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].sum({-1}, true); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].mean({1}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].var({1}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].var({0, 2}, false, true); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].std({2}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].std({}, false); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].max(1); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return max(v[0]); }, {x});
}

TEST(Gradcheck, ViewsAndCopies) {
  const Tensor x = random_f64({2, 3, 4}, 7);
  EXPECT_GRADCHECK([](const V& v) { return v[0].reshape({4, 6}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].transpose(0, 2).reshape({-1}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].permute({2, 0, 1}).contiguous(); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].flatten(1); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].unsqueeze(1).squeeze(); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].slice(2, 1, 4, 2); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].select(1, 0); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].slice(0, 0, 1).expand({5, 3, 4}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].unfold(2, 3, 1); }, {x});  // overlapping windows
  EXPECT_GRADCHECK([](const V& v) { return v[0].index_select(1, {2, 0, 2}); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return v[0].repeat({2, 1, 1, 2}); }, {x});
  const Tensor y = random_f64({2, 1, 4}, 8);
  EXPECT_GRADCHECK([](const V& v) { return cat({v[0], v[1]}, 1); }, {x, y});
  EXPECT_GRADCHECK([](const V& v) { return stack({v[0], v[0] * 2.0}, 3); }, {x});
}

TEST(Gradcheck, MatrixProducts) {
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); },
                   {random_f64({2, 1, 3, 4}, 9), random_f64({3, 4, 2}, 10)});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); }, {random_f64({4}, 11), random_f64({4}, 12)});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); }, {random_f64({3, 4}, 13), random_f64({4}, 14)});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0], v[1]); }, {random_f64({4}, 15), random_f64({2, 4, 3}, 16)});
  EXPECT_GRADCHECK([](const V& v) { return matmul(v[0].transpose(-1, -2), v[1]); },
                   {random_f64({2, 4, 3}, 17), random_f64({2, 4, 5}, 18)});
  EXPECT_GRADCHECK([](const V& v) { return bmm(v[0], v[1]); }, {random_f64({2, 3, 4}, 19), random_f64({2, 4, 2}, 20)});
  EXPECT_GRADCHECK([](const V& v) { return linear(v[0], v[1], v[2]); },
                   {random_f64({2, 3, 5}, 21), random_f64({4, 5}, 22), random_f64({4}, 23)});
  EXPECT_GRADCHECK([](const V& v) { return linear(v[0], v[1], Variable()); },
                   {random_f64({3, 5}, 24), random_f64({2, 5}, 25)});
}

TEST(Gradcheck, SoftmaxLayerNormLoss) {
  const Tensor x = random_f64({2, 3, 5}, 26, 2.0);
  EXPECT_GRADCHECK([](const V& v) { return softmax(v[0], -1); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return softmax(v[0], 1); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return log_softmax(v[0], 0); }, {x});
  EXPECT_GRADCHECK([](const V& v) { return layer_norm(v[0], {5}, v[1], v[2], 1e-5); },
                   {x, random_f64({5}, 27, 0.1, 1.0), random_f64({5}, 28, 0.1)});
  EXPECT_GRADCHECK(
      [](const V& v) {
        return layer_norm(v[0], {3, 5}, v[1], v[2], 1e-6);
      },
      {x, random_f64({3, 5}, 29, 0.1, 1.0), random_f64({3, 5}, 30, 0.1)});
  EXPECT_GRADCHECK([](const V& v) { return layer_norm(v[0], {5}, Variable(), Variable()); }, {x});
  // batch_norm with the batch's statistics (fresh running buffers each evaluation: they move), and
  // with fixed running statistics (evaluation).
  const Tensor maps = random_f64({3, 4, 2, 3}, 41, 2.0);
  EXPECT_GRADCHECK(
      [](const V& v) {
        return batch_norm(v[0], Tensor::zeros({4}, DType::F64), Tensor::ones({4}, DType::F64), v[1], v[2], true);
      },
      {maps, random_f64({4}, 42, 0.1, 1.0), random_f64({4}, 43, 0.1)});
  EXPECT_GRADCHECK([](const V& v) { return batch_norm(v[0], Tensor(), Tensor(), Variable(), Variable(), true); },
                   {maps});
  const Tensor rm = random_f64({4}, 44, 0.1), rv = random_f64({4}, 45, 0.1, 1.0);
  EXPECT_GRADCHECK([rm, rv](const V& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); },
                   {maps, random_f64({4}, 46, 0.1, 1.0), random_f64({4}, 47, 0.1)});
  const Tensor targets = Tensor::from_data(std::vector<int64_t>{2, 0, 4, 1}, {4});
  EXPECT_GRADCHECK([targets](const V& v) { return cross_entropy(v[0], targets); }, {random_f64({4, 5}, 31)});
  EXPECT_GRADCHECK([targets](const V& v) { return cross_entropy(v[0], targets, 0.1); }, {random_f64({4, 5}, 32)});
}

TEST(Gradcheck, ConvolutionAttentionDropout) {
  EXPECT_GRADCHECK([](const V& v) { return conv2d(v[0], v[1], v[2], 2, 1); },
                   {random_f64({2, 2, 5, 6}, 33), random_f64({3, 2, 3, 3}, 34), random_f64({3}, 35)});
  EXPECT_GRADCHECK([](const V& v) { return conv2d(v[0], v[1], Variable(), 4, 0); },
                   {random_f64({1, 3, 8, 8}, 36), random_f64({2, 3, 4, 4}, 37)});
  // Channels-last: (B, H, W, C) in and out; a 1x1 stride-1 convolution is the GEMM alone.
  EXPECT_GRADCHECK([](const V& v) { return conv2d_channels_last(v[0], v[1], v[2], 2, 1); },
                   {random_f64({2, 5, 6, 2}, 48), random_f64({3, 2, 3, 3}, 49), random_f64({3}, 50)});
  EXPECT_GRADCHECK([](const V& v) { return conv2d_channels_last(v[0], v[1], v[2], 1, 0); },
                   {random_f64({2, 3, 4, 5}, 51), random_f64({2, 5, 1, 1}, 52), random_f64({2}, 53)});
  EXPECT_GRADCHECK(
      [](const V& v) {
        return batch_norm_channels_last(v[0], Tensor::zeros({3}, DType::F64), Tensor::ones({3}, DType::F64), v[1], v[2],
                                        true);
      },
      {random_f64({2, 3, 2, 3}, 54, 2.0), random_f64({3}, 55, 0.1, 1.0), random_f64({3}, 56, 0.1)});
  EXPECT_GRADCHECK([](const V& v) { return self_attention(v[0], 2); }, {random_f64({2, 4, 12}, 38)});
  // Dropout and attention dropout: the same seed for every evaluation fixes the masks.
  EXPECT_GRADCHECK(
      [](const V& v) {
        Generator gen(99);
        return dropout(v[0], 0.3, true, gen);
      },
      {random_f64({4, 5}, 39)});
  EXPECT_GRADCHECK(
      [](const V& v) {
        Generator gen(7);
        return self_attention(v[0], 3, 0.25, true, &gen);
      },
      {random_f64({1, 5, 18}, 40)});
}

}  // namespace
}  // namespace vit
