// nn layers: the seed notebook examples, PyTorch defaults, parameter names and counts,
// train/eval, state dicts, and the PatchEmbed == unfold + flatten + Linear identity.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/init.h"
#include "nn/transformer.h"
#include "support/golden.h"

namespace vit {
namespace {

using nn::GeneratorPtr;

Variable var_of(std::vector<float> values, const Shape& shape, bool requires_grad = false) {
  return Variable(Tensor::from_data(values, shape), requires_grad);
}

TEST(LayerNorm, SeedExampleRowsHaveMeanZeroAndPopulationStdOne) {
  Variable x = var_of({0, 4, -1, 7, 3, 5}, {3, 2});
  nn::LayerNorm ln({2}, 0.0);
  Variable y = ln(x);
  const Tensor mean = y.mean({1}).data(), std = y.std({1}, false).data();
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_NEAR(mean.at({r}), 0.0, testing::kFloatValueTol);
    EXPECT_NEAR(std.at({r}), 1.0, testing::kFloatValueTol);
  }
  // std with unbiased=False of [[0,4],[-1,7],[3,5]] is [2, 4, 1].
  EXPECT_EQ(x.std({1}, false).data().to_vector(), (std::vector<double>{2, 4, 1}));
  EXPECT_NEAR(x.std({1}).data().at({0}), 2.8284271, testing::kFloatValueTol);  // unbiased default
}

TEST(LayerNorm, ParameterCounts) {
  EXPECT_EQ(nn::LayerNorm({2}, 1e-5, false).num_parameters(), 0);
  EXPECT_EQ(nn::LayerNorm({2}).num_parameters(), 4);
  EXPECT_EQ(nn::LayerNorm({3, 4}).num_parameters(), 24);
  nn::LayerNorm ln({2});
  EXPECT_EQ(ln.weight.data().to_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(ln.bias.data().to_vector(), (std::vector<double>{0, 0}));
  EXPECT_THROW(ln(var_of({1, 2, 3}, {1, 3})), Error);
}

TEST(Conv2d, SeedExampleShapes) {
  Generator gen(0);
  nn::Conv2d conv(3, 6, 4, 4, 0, true, gen);
  Generator data(1);
  Variable image(Tensor::randn({1, 3, 8, 8}, data));
  Variable y = conv(image);
  EXPECT_EQ(y.shape(), (Shape{1, 6, 2, 2}));
  EXPECT_EQ(y.flatten(2).transpose(1, 2).shape(), (Shape{1, 4, 6}));
  EXPECT_EQ(conv.num_parameters(), 6 * 3 * 4 * 4 + 6);
  // PyTorch's default init bound 1/sqrt(fan_in) = 1/sqrt(48).
  for (double w : conv.weight.data().to_vector()) EXPECT_LE(std::fabs(w), 1.0 / std::sqrt(48.0));
}

TEST(BatchNorm2d, BuffersInStateDictMovedInTrainingUsedInEval) {
  nn::BatchNorm2d bn(2);
  // Parameters are weight and bias only; the running statistics are buffers, in the state dict
  // after the parameters (PyTorch's order, without num_batches_tracked).
  std::vector<std::string> names;
  for (const auto& [n, _] : bn.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  names.clear();
  for (const auto& [n, _] : bn.state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var"}));
  EXPECT_EQ(bn.num_parameters(), 4);
  // Channel 0 holds 1..4, channel 1 holds 10 everywhere: batch means 2.5 and 10, unbiased
  // variances 5/3 and 0. One step of momentum 0.1 from (0, 1).
  const Variable x = var_of({1, 2, 3, 4, 10, 10, 10, 10}, {1, 2, 2, 2});
  const Tensor y = bn(x).data();
  EXPECT_NEAR(y.at({0, 0, 0, 0}), -1.5 / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NEAR(y.at({0, 1, 1, 1}), 0.0, 1e-6);
  EXPECT_NEAR(bn.running_mean.data().at({0}), 0.25, 1e-7);
  EXPECT_NEAR(bn.running_mean.data().at({1}), 1.0, 1e-6);
  EXPECT_NEAR(bn.running_var.data().at({0}), 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
  EXPECT_NEAR(bn.running_var.data().at({1}), 0.9, 1e-6);
  // Evaluation normalises with the running statistics and leaves them alone.
  bn.eval();
  const Tensor e = bn(x).data();
  EXPECT_NEAR(e.at({0, 0, 0, 0}), (1.0 - 0.25) / std::sqrt(0.9 + 0.1 * 5.0 / 3.0 + 1e-5), 1e-6);
  EXPECT_NEAR(bn.running_mean.data().at({0}), 0.25, 1e-7);
  // A state dict round trip carries the buffers.
  nn::BatchNorm2d other(2);
  other.load_state_dict(bn.state_dict());
  EXPECT_EQ(other.running_var.data().to_vector(), bn.running_var.data().to_vector());
  // One value per channel cannot be normalised in training; evaluation can.
  bn.train();
  EXPECT_THROW(bn(var_of({1, 2}, {1, 2, 1, 1})), Error);
  EXPECT_THROW(bn(var_of({1, 2, 3}, {1, 3, 1, 1})), Error);  // 3 channels for BatchNorm2d(2)
  bn.eval();
  EXPECT_NO_THROW(bn(var_of({1, 2}, {1, 2, 1, 1})));
}

TEST(PatchEmbed, EqualsUnfoldFlattenLinearWithTheSameWeights) {
  Generator gen(3);
  const int64_t B = 2, C = 3, S = 12, P = 4, D = 5;
  nn::PatchEmbed embed(S, P, C, D, gen);
  Variable x(Tensor::randn({B, C, S, S}, gen));
  Variable tokens = embed(x);  // (B, N, D)
  EXPECT_EQ(tokens.shape(), (Shape{B, 9, D}));
  // unfold H and W into patches: (B, C, H/P, W/P, P, P) -> (B, H/P, W/P, C, P, P) -> (B, N, C*P*P)
  Variable patches = x.unfold(2, P, P).unfold(3, P, P).permute({0, 2, 3, 1, 4, 5}).reshape({B, 9, C * P * P});
  Variable via_linear = linear(patches, embed.proj->weight.reshape({D, C * P * P}), embed.proj->bias);
  EXPECT_CLOSE(tokens.data(), via_linear.data(), testing::kFloatSameOpTol);
  EXPECT_THROW(embed(Variable(Tensor::zeros({1, 3, 10, 12}))), Error);
  EXPECT_THROW(embed(Variable(Tensor::zeros({1, 1, 12, 12}))), Error);
  EXPECT_THROW(nn::PatchEmbed(30, 7, 3, 8, gen), Error);
}

TEST(Dropout, InvertedScalingInTrainingIdentityInEval) {
  auto gen = std::make_shared<Generator>(5);
  nn::Dropout drop(0.5, gen);
  Variable x(Tensor::ones({10000}));
  const std::vector<double> y = drop(x).data().to_vector();
  int64_t kept = 0;
  for (double v : y) {
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v;  // survivors doubled
    kept += v == 2.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000.0, 0.5, testing::kDropoutFractionTol);
  drop.eval();
  EXPECT_EQ(drop(x).data().to_vector(), x.data().to_vector());
  EXPECT_THROW(nn::Dropout(1.5, gen), Error);
}

TEST(DropPath, DropsWholeSamples) {
  auto gen = std::make_shared<Generator>(11);
  nn::DropPath dp(0.5, gen);
  Variable x(Tensor::ones({64, 3, 4}));
  const Tensor y = dp(x).data();
  for (int64_t b = 0; b < 64; ++b) {
    const double first = y.at({b, 0, 0});
    EXPECT_TRUE(first == 0.0 || first == 2.0);
    for (double v : y.select(0, b).to_vector()) EXPECT_EQ(v, first);
  }
  dp.eval();
  EXPECT_EQ(dp(x).data().to_vector(), x.data().to_vector());
}

TEST(Activations, ModulesMatchFunctions) {
  Variable x = var_of({-2, -0.5, 0, 0.5, 2}, {5});
  EXPECT_EQ(nn::ReLU()(x).data().to_vector(), (std::vector<double>{0, 0, 0, 0.5, 2}));
  EXPECT_NEAR(nn::GELU()(x).data().at({4}), 1.9544997, testing::kFloatValueTol);
  EXPECT_NEAR(nn::GELU(true)(x).data().at({4}), 1.9545977, testing::kFloatValueTol);
  EXPECT_NEAR(nn::Tanh()(x).data().at({0}), -0.9640276, testing::kFloatValueTol);
  EXPECT_NEAR(nn::Softmax(0)(x).sum().item(), 1.0, testing::kFloatValueTol);
}

TEST(Module, NamesCountsTrainEvalAndStateDict) {
  auto gen = std::make_shared<Generator>(0);
  nn::Sequential seq;
  seq.push_back(std::make_shared<nn::Linear>(4, 8, true, *gen));
  seq.push_back(std::make_shared<nn::GELU>());
  seq.push_back(std::make_shared<nn::Dropout>(0.1, gen));
  seq.push_back(std::make_shared<nn::Linear>(8, 2, false, *gen));
  std::vector<std::string> names;
  for (const auto& [name, _] : seq.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight"}));
  EXPECT_EQ(seq.num_parameters(), 4 * 8 + 8 + 8 * 2);
  EXPECT_TRUE(seq.named_children()[2].second->is_training());
  seq.eval();
  EXPECT_FALSE(seq.named_children()[2].second->is_training());
  EXPECT_EQ(seq(Variable(Tensor::zeros({3, 4}))).shape(), (Shape{3, 2}));

  // State dict round trip into a differently initialised twin.
  auto gen2 = std::make_shared<Generator>(1);
  nn::Sequential twin;
  twin.push_back(std::make_shared<nn::Linear>(4, 8, true, *gen2));
  twin.push_back(std::make_shared<nn::GELU>());
  twin.push_back(std::make_shared<nn::Dropout>(0.1, gen2));
  twin.push_back(std::make_shared<nn::Linear>(8, 2, false, *gen2));
  twin.load_state_dict(seq.state_dict());
  EXPECT_EQ(twin.state_dict()[2].second.to_vector(), seq.state_dict()[2].second.to_vector());

  // Wrong shape, missing and unexpected keys are refused and change nothing.
  const std::vector<double> before = twin.state_dict()[0].second.to_vector();
  nn::StateDict bad = seq.state_dict();
  bad[0].second = Tensor::zeros({8, 5});
  try {
    twin.load_state_dict(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[load_state_dict] '0.weight': expected shape (8, 4), got (8, 5)");
  }
  nn::StateDict partial = seq.state_dict();
  partial.pop_back();
  partial.emplace_back("extra", Tensor::zeros({1}));
  EXPECT_THROW(twin.load_state_dict(partial), Error);
  EXPECT_EQ(twin.state_dict()[0].second.to_vector(), before);
  const nn::LoadResult r = twin.load_state_dict(partial, false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"3.weight"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra"}));
}

TEST(Linear, DefaultsAndErrors) {
  Generator gen(0);
  nn::Linear lin(3, 2, true, gen);
  EXPECT_EQ(lin.weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(lin.bias.shape(), (Shape{2}));
  EXPECT_EQ(lin(Variable(Tensor::zeros({4, 7, 3}))).shape(), (Shape{4, 7, 2}));
  EXPECT_THROW(lin(Variable(Tensor::zeros({4, 5}))), Error);
  EXPECT_FALSE(nn::Linear(3, 2, false, gen).bias.defined());
}

}  // namespace
}  // namespace vit

namespace vit {
namespace {

// Loading for inference: SkipInit leaves new weights untouched, and a shared load makes the
// parameters use the given tensors' storage (no copy) while a normal load copies.
TEST(Module, SkipInitAndSharedLoading) {
  Tensor t = Tensor::full({4}, 7.0);
  Generator gen(0);
  {
    nn::init::SkipInit skip;
    EXPECT_TRUE(nn::init::SkipInit::active());
    nn::init::normal_(t, 0.0, 1.0, gen);
    nn::init::trunc_normal_(t, 0.02, gen);
  }
  EXPECT_FALSE(nn::init::SkipInit::active());
  EXPECT_EQ(t.to_vector(), std::vector<double>(4, 7.0));
  nn::init::normal_(t, 0.0, 1.0, gen);
  EXPECT_NE(t.to_vector(), std::vector<double>(4, 7.0));

  nn::Linear source(3, 2, true, gen), copied(3, 2, true, gen), shared(3, 2, true, gen);
  copied.load_state_dict(source.state_dict());
  shared.load_state_dict(source.state_dict(), true, /*share=*/true);
  EXPECT_NE(copied.weight.data().raw_data(), source.weight.data().raw_data());
  EXPECT_EQ(shared.weight.data().raw_data(), source.weight.data().raw_data());
  EXPECT_EQ(copied.weight.data().to_vector(), source.weight.data().to_vector());
}

}  // namespace
}  // namespace vit
