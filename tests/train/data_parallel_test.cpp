// Data-parallel steps: R replicas sharing the master's weights produce the full-batch gradient
// (equal to one replica's up to float summation order), deterministically, with mixup too.
#include "train/data_parallel.h"

#include <gtest/gtest.h>

#include "support/files.h"
#include "support/golden.h"

namespace vit::train {
namespace {

model::ViTConfig small_config() {
  model::ViTConfig c = model::preset("vit_digits");
  c.patch_size = 7;
  c.dim = 16;
  c.depth = 2;
  c.num_heads = 2;
  c.pool = "mean";
  c.drop_path = 0.0;  // no randomness: one and two replicas must compute the same thing
  return c;
}

std::vector<Tensor> gradients(const model::VisionTransformer& m) {
  std::vector<Tensor> out;
  for (const auto& [_, p] : m.named_parameters()) out.push_back(p.grad().clone());
  return out;
}

TEST(DataParallel, TwoReplicasGiveTheFullBatchGradient) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 37, 5);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Train, 1, 28);
  data::AugmentConfig aug;
  aug.mixup_alpha = 0.3;
  const uint64_t gen = 1;  // the batch's random key
  std::vector<int64_t> all(37);
  for (int64_t i = 0; i < 37; ++i) all[i] = i;  // odd size: uneven slices
  const data::Batch batch = data::make_batch(d, all, aug, {{0.1}, {0.3}}, true, gen);
  ASSERT_LT(batch.lam, 1.0);

  model::VisionTransformer model(small_config(), std::make_shared<Generator>(7));
  DataParallel one(model, 1);
  const auto r1 = one.forward_backward(batch, 0.1);
  const std::vector<Tensor> g1 = gradients(model);
  DataParallel two(model, 2);
  const auto r2 = two.forward_backward(batch, 0.1);
  const std::vector<Tensor> g2 = gradients(model);
  const auto r2_again = two.forward_backward(batch, 0.1);
  const std::vector<Tensor> g2_again = gradients(model);

  EXPECT_NEAR(r1.loss, r2.loss, testing::kFloatSumTol);
  EXPECT_EQ(r1.correct, r2.correct);
  const auto names = model.named_parameters();
  for (size_t i = 0; i < g1.size(); ++i) {
    EXPECT_TRUE(testing::all_close(g2[i], g1[i], testing::kDataParallelGradTol, names[i].first));
    EXPECT_EQ(g2[i].to_vector(), g2_again[i].to_vector()) << names[i].first << " (determinism)";
  }
  EXPECT_EQ(r2.loss, r2_again.loss);

  // A batch smaller than the replica count runs on fewer replicas (here 2 of 3); the idle
  // replica's gradients from the step before must not leak in: the result equals 2 replicas'.
  const data::Batch pair = data::make_batch(d, {5, 9}, {}, {{0.1}, {0.3}}, true, gen);
  DataParallel three(model, 3);
  three.forward_backward(batch, 0.1);  // all three replicas hold gradients now
  three.forward_backward(pair, 0.1);
  const std::vector<Tensor> g_three = gradients(model);
  two.forward_backward(pair, 0.1);
  const std::vector<Tensor> g_two = gradients(model);
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g_three[i].to_vector(), g_two[i].to_vector()) << names[i].first;
}

}  // namespace
}  // namespace vit::train
