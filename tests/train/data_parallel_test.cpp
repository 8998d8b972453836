// Data-parallel steps: R replicas sharing the master's weights produce the full-batch gradient
// (equal to one replica's up to float summation order), deterministically, with mixup too.
#include "train/data_parallel.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "support/files.h"
#include "support/golden.h"
#include "train/evaluate.h"

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

// A hybrid's BatchNorm: each replica normalises with its own slice's statistics and moves its own
// running estimates; after the step the master holds their mean and every replica starts the
// next step from it. For the first BatchNorm (its input does not depend on the others) the mean of
// two equal slices' running means is the full batch's.
TEST(DataParallel, ReplicasAverageTheirBatchNormStatistics) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 32, 4);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Train, 1, 28);
  std::vector<int64_t> all(32);
  for (int64_t i = 0; i < 32; ++i) all[i] = i;
  const data::Batch batch = data::make_batch(d, all, {}, {{0.1}, {0.3}}, true, 1);
  model::ViTConfig c = small_config();
  c.patch_size = 4;
  c.conv_stages = 2;
  c.conv_channels = 4;
  c.conv_blocks = 1;
  c.conv_stem_stride = 2;
  auto running_mean = [](const model::VisionTransformer& m, const std::string& name) {
    for (const auto& [n, b] : m.named_buffers()) {
      if (n == name) return b.data().clone();
    }
    ADD_FAILURE() << "no buffer " << name;
    return Tensor();
  };
  model::VisionTransformer single(c, std::make_shared<Generator>(7));
  DataParallel one(single, 1);
  one.forward_backward(batch, 0.0);
  model::VisionTransformer master(c, std::make_shared<Generator>(7));
  DataParallel two(master, 2);
  two.forward_backward(batch, 0.0);
  const std::string stem = "backbone.stem.bn.running_mean";
  EXPECT_TRUE(testing::all_close(running_mean(master, stem), running_mean(single, stem), {1e-5}, stem));
  // Deeper statistics differ from one replica's (each slice was normalised by its own), but are
  // the mean of the two slices' and no longer their initial values.
  const std::string deep = "backbone.stages.1.0.bn2.running_var";
  const Tensor v = running_mean(master, deep);
  double off_one = 0;
  for (double x : v.to_vector()) off_one += std::abs(x - 1.0);
  EXPECT_GT(off_one, 0.0);
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

// Mixed precision (set_matmul_precision) reaches every replica: two bf16 replicas give one bf16
// replica's gradient up to summation order, not float32's.
TEST(DataParallel, Bf16ReachesEveryReplica) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 24, 5);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Train, 1, 28);
  std::vector<int64_t> all(24);
  for (int64_t i = 0; i < 24; ++i) all[i] = i;
  const data::Batch batch = data::make_batch(d, all, {}, {{0.1}, {0.3}}, false, 1);
  model::VisionTransformer model(small_config(), std::make_shared<Generator>(7));
  DataParallel one(model, 1), two(model, 2);
  one.forward_backward(batch, 0.1);
  const std::vector<Tensor> f32 = gradients(model);
  one.set_matmul_precision(MatmulPrecision::BF16);
  two.set_matmul_precision(MatmulPrecision::BF16);
  one.forward_backward(batch, 0.1);
  const std::vector<Tensor> g1 = gradients(model);
  two.forward_backward(batch, 0.1);
  const std::vector<Tensor> g2 = gradients(model);
  const auto names = model.named_parameters();
  double differs = 0.0;  // the largest difference between one bf16 replica's gradient and float32's
  for (size_t i = 0; i < g1.size(); ++i) {
    EXPECT_TRUE(testing::all_close(g2[i], g1[i], testing::kDataParallelGradTol, names[i].first));
    EXPECT_TRUE(testing::all_close(g1[i], f32[i], testing::kBf16VsFloatTol, names[i].first));
    const std::vector<double> a = g1[i].to_vector(), b = f32[i].to_vector();
    for (size_t k = 0; k < a.size(); ++k) differs = std::max(differs, std::fabs(a[k] - b[k]));
  }
  EXPECT_GT(differs, 0.0);
}

// Dropout, attention dropout and drop-path draw per sample, keyed by (seed, step, position in the
// global batch): 1, 2 and 3 replicas (each holding a different slice) draw the same masks, so
// their gradients agree up to summation order; another step draws other masks.
TEST(DataParallel, DropoutAndDropPathMasksDoNotDependOnTheSlicing) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 24, 5);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Train, 1, 28);
  std::vector<int64_t> all(23);
  for (int64_t i = 0; i < 23; ++i) all[i] = i;
  const data::Batch batch = data::make_batch(d, all, {}, {{0.1}, {0.3}}, true, 5);
  model::ViTConfig c = small_config();
  c.dropout = 0.2;
  c.attn_dropout = 0.2;
  c.drop_path = 0.3;
  model::VisionTransformer model(c, std::make_shared<Generator>(7));
  model.train();
  std::vector<std::vector<Tensor>> grads;
  for (int replicas : {1, 2, 3}) {
    DataParallel parallel(model, replicas);
    parallel.reseed(11, 4);
    parallel.forward_backward(batch, 0.0);
    grads.push_back(gradients(model));
  }
  DataParallel other_step(model, 1);
  other_step.reseed(11, 5);
  other_step.forward_backward(batch, 0.0);
  const std::vector<Tensor> g_other = gradients(model);
  const auto names = model.named_parameters();
  bool differs = false;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    for (size_t r = 1; r < grads.size(); ++r) {
      EXPECT_TRUE(testing::all_close(grads[r][i], grads[0][i], testing::kDataParallelGradTol, names[i].first))
          << r + 1 << " replicas";
    }
    differs = differs || !testing::all_close(g_other[i], grads[0][i], testing::kDataParallelGradTol, names[i].first);
  }
  EXPECT_TRUE(differs) << "step 5 must draw other masks than step 4";
}

// Sharded evaluation: two processes (here threads, with an allreduce made of a barrier) each
// evaluating half of the images end with the whole set's result, equal to one evaluation's.
TEST(DataParallel, ShardedEvaluationEqualsOneEvaluation) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 8, 37);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Test, 1, 28);
  model::VisionTransformer model(small_config(), std::make_shared<Generator>(3));
  const data::Normalization norm{{0.1}, {0.3}};
  const EvalResult whole = evaluate(model, d, norm, 8);
  std::vector<double> slots[2];
  std::barrier sync(2);
  EvalResult parts[2];
  auto shard = [&](int r) {
    model::VisionTransformer copy(small_config(), std::make_shared<Generator>(3));  // same weights (same seed)
    EvalShard s{r, 2, [&](std::vector<double>& v) {
                  slots[r] = v;
                  sync.arrive_and_wait();
                  for (size_t k = 0; k < v.size(); ++k) v[k] = slots[0][k] + slots[1][k];
                  sync.arrive_and_wait();
                }};
    parts[r] = evaluate(copy, d, norm, 8, s);
  };
  std::thread other(shard, 1);
  shard(0);
  other.join();
  for (const EvalResult& p : parts) {
    EXPECT_EQ(p.count, whole.count);
    EXPECT_NEAR(p.loss, whole.loss, 1e-6);  // float32 batch means over other batch boundaries
    EXPECT_EQ(p.top1, whole.top1);
    EXPECT_EQ(p.top5, whole.top5);
    EXPECT_EQ(p.confusion, whole.confusion);
    EXPECT_EQ(p.predictions, whole.predictions);
    EXPECT_EQ(p.confidence, whole.confidence);
  }
}

// DeiT's distillation through DataParallel: the teacher's logits of each replica's rows, the
// class head on the labels and the distillation head on the teacher's top class; one and two
// replicas agree, and the loss is the formula's.
TEST(DataParallel, DistillationFromATeacherCheckpoint) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 21, 5);
  const data::Dataset d = data::load_dataset(dir.path(), data::Split::Train, 1, 28);
  std::vector<int64_t> all(21);
  for (int64_t i = 0; i < 21; ++i) all[i] = i;
  const data::Batch batch = data::make_batch(d, all, {}, {{0.1}, {0.3}}, true, 1);

  model::VisionTransformer teacher_model(small_config(), std::make_shared<Generator>(3));
  checkpoint::CheckpointInfo info;
  info.model = teacher_model.config();
  info.normalization = {{0.1}, {0.3}};
  checkpoint::save_checkpoint(dir.file("teacher.safetensors"), teacher_model, info);
  model::ViTConfig student = small_config();
  student.pool = "cls";
  student.dist_token = true;
  student.reg_tokens = 2;
  student.layer_scale = 0.1;
  Teacher teacher(dir.file("teacher.safetensors"), student, d.class_names);
  model::VisionTransformer model(student, std::make_shared<Generator>(7));
  DistillationSettings settings;
  settings.alpha = 0.25;

  DataParallel one(model, 1);
  one.set_teacher(&teacher, settings);
  const auto r1 = one.forward_backward(batch, 0.0);
  const std::vector<Tensor> g1 = gradients(model);
  DataParallel two(model, 2);
  two.set_teacher(&teacher, settings);
  const auto r2 = two.forward_backward(batch, 0.0);
  const std::vector<Tensor> g2 = gradients(model);
  EXPECT_NEAR(r1.loss, r2.loss, testing::kFloatSumTol);
  const auto names = model.named_parameters();
  for (size_t i = 0; i < g1.size(); ++i) {
    ASSERT_TRUE(g1[i].defined()) << names[i].first;
    EXPECT_TRUE(testing::all_close(g2[i], g1[i], testing::kDataParallelGradTol, names[i].first));
  }
  // The loss: 0.75 CE(head(x_cls), labels) + 0.25 CE(head_dist(x_dist), argmax teacher(x)).
  NoGradGuard no_grad;
  teacher_model.eval();
  const Tensor t = teacher_model(Variable(batch.images)).data();
  auto [cls, dist] = model.forward_distilled(Variable(batch.images));
  const double expected =
      0.75 * cross_entropy(cls, batch.targets).item() + 0.25 * cross_entropy(dist, argmax(Variable(t), 1)).item();
  EXPECT_NEAR(r1.loss, expected, testing::kFloatSumTol);
  // A student of other classes, or a feature extractor, is refused by name.
  model::ViTConfig other = student;
  other.num_classes = 7;
  EXPECT_THROW(Teacher(dir.file("teacher.safetensors"), other, d.class_names), Error);
  EXPECT_THROW(Teacher(dir.file("missing.safetensors"), student, d.class_names), Error);
  model::ViTConfig features_only = small_config();
  features_only.num_classes = 0;
  info.model = features_only;
  checkpoint::save_checkpoint(dir.file("features.safetensors"),
                              model::VisionTransformer(features_only, std::make_shared<Generator>(1)), info);
  try {
    Teacher refused(dir.file("features.safetensors"), student, d.class_names);
    ADD_FAILURE() << "a feature extractor taken as a teacher";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no classifier head (a feature extractor)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vit::train
