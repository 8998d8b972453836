// Optimiser pieces: timm's weight-decay rule, the warmup + cosine schedule, global-norm clipping,
// EMA, and state save/restore.
#include "optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/tolerances.h"

namespace vit::optim {
namespace {

Variable param(Shape shape, float value) {
  Variable p(Tensor::full(shape, value), true);
  return p;
}

TEST(WeightDecay, TimmRuleSkipsBiasesNormsClsTokenAndPosEmbed) {
  EXPECT_TRUE(decays("blocks.0.attn.qkv.weight", param({6, 2}, 1)));
  EXPECT_TRUE(decays("patch_embed.proj.weight", param({2, 1, 2, 2}, 1)));
  EXPECT_FALSE(decays("blocks.0.attn.qkv.bias", param({6}, 1)));
  EXPECT_FALSE(decays("norm.weight", param({2}, 1)));
  EXPECT_FALSE(decays("cls_token", param({1, 1, 2}, 1)));
  EXPECT_FALSE(decays("pos_embed", param({1, 5, 2}, 1)));
  EXPECT_FALSE(decays("dist_token", param({1, 1, 2}, 1)));  // timm's no_weight_decay() names it too
  EXPECT_TRUE(decays("reg_token", param({1, 4, 2}, 1)));    // timm decays registers
}

TEST(Schedule, LinearWarmupThenCosineToMin) {
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 10, 110, 1.0, 0.0), 0.1);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(9, 10, 110, 1.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(10, 10, 110, 1.0, 0.0), 1.0);
  EXPECT_NEAR(warmup_cosine_lr(60, 10, 110, 1.0, 0.0), 0.5, testing::kDoubleFormulaTol);
  EXPECT_NEAR(warmup_cosine_lr(110, 10, 110, 1.0, 0.01), 0.01, testing::kDoubleFormulaTol);
  EXPECT_NEAR(warmup_cosine_lr(500, 10, 110, 1.0, 0.01), 0.01,
              testing::kDoubleFormulaTol);  // stays at min past the end
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 0, 100, 2.0, 0.0), 2.0);
}

// A re-planned schedule: the cosine's progress is continuous at each re-plan and reaches the
// minimum at the new end, shortened or lengthened; without re-plans it is the plain schedule.
TEST(Schedule, ReplannedCosineContinuesWhereItWas) {
  for (int64_t step : {0, 5, 10, 60, 110}) {
    EXPECT_DOUBLE_EQ(replanned_cosine_lr(step, 10, {}, 110, 1.0, 0.01), warmup_cosine_lr(step, 10, 110, 1.0, 0.01));
    EXPECT_DOUBLE_EQ(replanned_cosine_lr(step, 10, {{0, 110}}, 110, 1.0, 0.01),
                     warmup_cosine_lr(step, 10, 110, 1.0, 0.01));
  }
  // Planned 110 steps (warmup 10); at step 60 (progress 1/2) re-planned to end at 80.
  const std::vector<std::vector<int64_t>> shorter = {{0, 110}, {60, 80}};
  EXPECT_DOUBLE_EQ(replanned_cosine_lr(5, 10, shorter, 80, 1.0, 0.0), 0.6);  // warmup untouched
  EXPECT_DOUBLE_EQ(replanned_cosine_lr(40, 10, shorter, 80, 1.0, 0.0), warmup_cosine_lr(40, 10, 110, 1.0, 0.0));
  EXPECT_NEAR(replanned_cosine_lr(60, 10, shorter, 80, 1.0, 0.0), 0.5, testing::kDoubleFormulaTol);
  // Half of what was left (progress 3/4) ten steps later, the minimum at 80.
  EXPECT_NEAR(replanned_cosine_lr(70, 10, shorter, 80, 1.0, 0.0), 0.5 * (1 + std::cos(M_PI * 0.75)),
              testing::kDoubleFormulaTol);
  EXPECT_NEAR(replanned_cosine_lr(80, 10, shorter, 80, 1.0, 0.0), 0.0, testing::kDoubleFormulaTol);
  // Lengthened, then shortened again: still continuous at each change.
  const std::vector<std::vector<int64_t>> twice = {{0, 110}, {60, 160}, {110, 130}};
  EXPECT_NEAR(replanned_cosine_lr(110, 10, twice, 130, 1.0, 0.0),
              replanned_cosine_lr(110, 10, {{0, 110}, {60, 160}}, 160, 1.0, 0.0), testing::kDoubleFormulaTol);
  EXPECT_NEAR(replanned_cosine_lr(130, 10, twice, 130, 1.0, 0.0), 0.0, testing::kDoubleFormulaTol);
  double previous = 2.0;
  for (int64_t step = 10; step <= 130; ++step) {  // never rises after the warmup
    const double lr = replanned_cosine_lr(step, 10, twice, 130, 1.0, 0.0);
    EXPECT_LE(lr, previous + 1e-12) << step;
    previous = lr;
  }
}

TEST(Clipping, ScalesToMaxNormAndReportsNormBefore) {
  Variable a = param({2}, 0), b = param({1}, 0);
  a.set_grad(Tensor::from_data(std::vector<float>{3, 0}, {2}));
  b.set_grad(Tensor::from_data(std::vector<float>{4}, {1}));
  const NamedParameters ps = {{"a", a}, {"b", b}};
  EXPECT_NEAR(clip_grad_norm(ps, 1.0), 5.0, testing::kFloatValueTol);
  EXPECT_NEAR(grad_norm(ps), 1.0, testing::kFloatSumTol);
  EXPECT_NEAR(a.grad().at({0}), 0.6, testing::kFloatValueTol);
  EXPECT_NEAR(clip_grad_norm(ps, 10.0), 1.0, testing::kFloatSumTol);  // below the bound: unchanged
  EXPECT_NEAR(a.grad().at({0}), 0.6, testing::kFloatValueTol);
  b.set_grad(Tensor::from_data(std::vector<float>{NAN}, {1}));
  EXPECT_TRUE(std::isnan(clip_grad_norm(ps, 1.0)));
}

TEST(AdamW, FirstStepMovesEachWeightByLrAndDecaysOnlyMatrices) {
  Variable w = param({2, 2}, 1.0f), bias = param({2}, 1.0f);
  AdamW opt({{"fc.weight", w}, {"fc.bias", bias}}, 0.1, 0.5);
  w.set_grad(Tensor::full({2, 2}, 2.0f));
  bias.set_grad(Tensor::full({2}, -3.0f));
  opt.step();
  // Decoupled decay: w * (1 - lr * wd) = 0.95, then the bias-corrected Adam step of size lr.
  EXPECT_NEAR(w.data().at({0, 0}), 0.95 - 0.1, testing::kFloatValueTol);
  EXPECT_NEAR(bias.data().at({0}), 1.0 + 0.1, testing::kFloatValueTol);
  EXPECT_EQ(opt.steps(), 1);
}

TEST(WeightDecay, SetDecayedChoosesPerParameterAsTorchOptimDecaysAll) {
  // torch.optim decays every parameter of a group: with every flag set the bias decays as the
  // weight does (AdamW: 1 * (1 - 0.1 * 0.5) - 0.1; SGD: 1 - 0.1 * (2 + 0.5)), and a cleared flag
  // spares a matrix. The default (no flags) stays timm's rule.
  for (const bool sgd : {false, true}) {
    Variable w = param({2, 2}, 1.0f), bias = param({2}, 1.0f), spared = param({2, 2}, 1.0f);
    const NamedParameters params{{"fc.weight", w}, {"fc.bias", bias}, {"x.weight", spared}};
    std::unique_ptr<Optimizer> opt;
    if (sgd)
      opt = std::make_unique<SGD>(params, 0.1, 0.0, 0.5);
    else
      opt = std::make_unique<AdamW>(params, 0.1, 0.5);
    opt->set_decayed({true, true, false});
    for (Variable p : {w, bias, spared}) p.set_grad(Tensor::full(p.shape(), 2.0f));
    opt->step();
    const double decayed = sgd ? 1 - 0.1 * 2.5 : 0.95 - 0.1, plain = sgd ? 1 - 0.1 * 2 : 1 - 0.1;
    EXPECT_NEAR(w.data().at({0, 0}), decayed, testing::kFloatValueTol);
    EXPECT_NEAR(bias.data().at({0}), decayed, testing::kFloatValueTol);
    EXPECT_NEAR(spared.data().at({0, 0}), plain, testing::kFloatValueTol);
    EXPECT_THROW(opt->set_decayed({true}), Error);  // one per parameter
    opt->set_decayed({});                           // back to timm's rule
    EXPECT_TRUE(opt->decayed(0) && !opt->decayed(1) && opt->decayed(2));
  }
}

TEST(Optimizer, RefusesATensorGivenTwice) {
  Variable w = param({2}, 1.0f);
  Variable same = w;  // another handle on the same tensor
  try {
    SGD({{"a", w}, {"b", param({2}, 1.0f)}, {"c", same}}, 0.1);
    FAIL() << "a tensor given twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[optimizer] parameters a and c are the same tensor"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(AdamW({{"w", w}, {"w2", w}}, 0.1), Error);
  EXPECT_NO_THROW(AdamW({{"w", w}, {"copy", Variable(w.data().clone(), true)}}, 0.1));  // equal values: fine
}

TEST(AdamW, LrScalesActAsAParamGroupsLrDecayIncluded) {
  // Scale 0.5 on the weight: decay w * (1 - 0.05 * 0.5) = 0.975, then a step of 0.05; the bias at
  // scale 2 moves 0.2; a scale 0 leaves a parameter as it is.
  Variable w = param({2, 2}, 1.0f), bias = param({2}, 1.0f), frozen = param({2}, 1.0f);
  AdamW opt({{"fc.weight", w}, {"fc.bias", bias}, {"x.weight", frozen}}, 0.1, 0.5);
  opt.set_lr_scales({0.5, 2.0, 0.0});
  w.set_grad(Tensor::full({2, 2}, 2.0f));
  bias.set_grad(Tensor::full({2}, -3.0f));
  frozen.set_grad(Tensor::full({2}, 1.0f));
  opt.step();
  EXPECT_NEAR(w.data().at({0, 0}), 0.975 - 0.05, testing::kFloatSumTol);
  EXPECT_NEAR(bias.data().at({0}), 1.0 + 0.2, testing::kFloatSumTol);
  EXPECT_EQ(frozen.data().at({0}), 1.0f);
  EXPECT_THROW(opt.set_lr_scales({1.0}), Error);             // one per parameter
  EXPECT_THROW(opt.set_lr_scales({1.0, -1.0, 1.0}), Error);  // never negative
}

TEST(AdamW, StateRoundTripsAndIsChecked) {
  Variable w = param({3}, 1.0f);
  AdamW a({{"w", w}}, 0.01);
  w.set_grad(Tensor::full({3}, 1.0f));
  a.step();
  a.step();
  Variable w2 = param({3}, 1.0f);
  AdamW b({{"w", w2}}, 0.01);
  b.load_state(a.state());
  EXPECT_EQ(b.steps(), 2);
  EXPECT_EQ(b.state()[1].second.to_vector(), a.state()[1].second.to_vector());
  Variable other = param({4}, 1.0f);
  AdamW c({{"w", other}}, 0.01);
  EXPECT_THROW(c.load_state(a.state()), Error);
  AdamW d({{"v", w2}}, 0.01);
  EXPECT_THROW(d.load_state(a.state()), Error);
}

TEST(Sgd, MomentumMatchesTorchFormula) {
  Variable w = param({1}, 1.0f);
  SGD opt({{"w", w}}, 0.1, 0.9, 0.0);
  w.set_grad(Tensor::full({1}, 1.0f));
  opt.step();  // buf = 1, w = 0.9
  opt.step();  // buf = 1.9, w = 0.71
  EXPECT_NEAR(w.data().at({0}), 0.71, testing::kFloatValueTol);
}

TEST(Ema, TracksTheParameters) {
  Variable w = param({2}, 0.0f);
  ModelEma ema({{"w", w}}, 0.5);
  w.data().fill_(1.0);
  ema.update({{"w", w}});
  EXPECT_NEAR(ema.averages()[0].second.at({0}), 0.5, testing::kFloatUlpTol);
  ema.update({{"w", w}});
  EXPECT_NEAR(ema.averages()[0].second.at({0}), 0.75, testing::kFloatUlpTol);
  EXPECT_THROW(ModelEma({{"w", w}}, 1.5), Error);
}

TEST(Ema, WarmupFollowsTensorFlowsNumUpdates) {
  EXPECT_DOUBLE_EQ(ModelEma::warmed_up(0.999, 0), 0.1);  // the first update keeps 90% of the weights
  EXPECT_DOUBLE_EQ(ModelEma::warmed_up(0.999, 90), 0.91);
  EXPECT_DOUBLE_EQ(ModelEma::warmed_up(0.999, 100000), 0.999);
  Variable w = param({1}, 0.0f);
  ModelEma ema({{"w", w}}, 0.999);
  w.data().fill_(1.0);
  ema.update({{"w", w}}, 0);  // d = 0.1
  EXPECT_NEAR(ema.averages()[0].second.at({0}), 0.9, testing::kFloatUlpTol);
}

}  // namespace
}  // namespace vit::optim
