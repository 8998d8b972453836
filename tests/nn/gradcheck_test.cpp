// Finite-difference gradient checks in float64 for whole layers: the input and every parameter.
#include "support/gradcheck.h"

#include <gtest/gtest.h>

#include "nn/transformer.h"

namespace vit {
namespace {

::testing::AssertionResult gradcheck_module(nn::Module& m, const Tensor& input) {
  m.to(DType::F64);
  Variable x(input.clone(), true);
  std::vector<Variable> leaves{x};
  for (const auto& [_, p] : m.named_parameters()) leaves.push_back(p);
  return testing::gradcheck_leaves([&] { return m.forward(x); }, leaves);
}

TEST(LayerGradcheck, EveryLayer) {
  Generator gen(0);
  auto shared = std::make_shared<Generator>(1);
  nn::Linear lin(5, 3, true, gen);
  EXPECT_TRUE(gradcheck_module(lin, testing::random_f64({2, 4, 5}, 1)));
  nn::LayerNorm ln({3, 5}, 1e-6);
  EXPECT_TRUE(gradcheck_module(ln, testing::random_f64({2, 3, 5}, 2)));
  nn::Conv2d conv(2, 3, 3, 2, 1, true, gen);
  EXPECT_TRUE(gradcheck_module(conv, testing::random_f64({2, 2, 5, 5}, 3)));
  nn::PatchEmbed pe(4, 2, 2, 3, gen);
  EXPECT_TRUE(gradcheck_module(pe, testing::random_f64({2, 2, 4, 4}, 4)));
  nn::Mlp mlp(4, 6, 4, 0.0, shared);
  EXPECT_TRUE(gradcheck_module(mlp, testing::random_f64({2, 3, 4}, 5)));
  nn::MultiHeadSelfAttention attn(6, 2, true, 0.0, 0.0, shared);
  EXPECT_TRUE(gradcheck_module(attn, testing::random_f64({2, 3, 6}, 6)));
  nn::EncoderBlockConfig c;
  c.dim = 6;
  c.num_heads = 3;
  c.mlp_ratio = 2.0;
  nn::EncoderBlock block(c, shared);
  EXPECT_TRUE(gradcheck_module(block, testing::random_f64({2, 4, 6}, 7)));
  nn::Sequential seq({std::make_shared<nn::Linear>(4, 4, true, gen), std::make_shared<nn::Tanh>(),
                      std::make_shared<nn::ReLU>(), std::make_shared<nn::GELU>(true),
                      std::make_shared<nn::Softmax>(-1)});
  EXPECT_TRUE(gradcheck_module(seq, testing::random_f64({3, 4}, 8)));
}

}  // namespace
}  // namespace vit
