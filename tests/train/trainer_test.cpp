// The trainer on a small generated dataset: it learns, writes metrics.jsonl / report.html /
// checkpoints, resumes to bit-identical weights, and stops on a NaN loss keeping the last good
// checkpoint.
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "support/files.h"
#include "support/tiny_train.h"

namespace vit::train {
namespace {

using testing::TempDir;
using testing::tiny_train_config;

std::vector<nlohmann::json> metrics(const std::string& dir) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(Trainer, LearnsAndWritesMetricsReportAndCheckpoints) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 320, 100);
  TrainConfig c = tiny_train_config(dir.file("data"), dir.file("run"), 6);
  c.batch_size = 16;
  const TrainResult r = train(c);
  EXPECT_EQ(r.epochs_run, 6);
  EXPECT_GT(r.final_test_accuracy, 0.9) << "the stripe-period toy task is easy";
  const auto rows = metrics(dir.file("run"));
  ASSERT_EQ(rows.size(), 6u);
  for (const char* key : {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "images_per_s", "seconds"}) {
    EXPECT_TRUE(rows.back().contains(key)) << key;
  }
  EXPECT_EQ(rows.back()["epoch"], 6);
  EXPECT_LT(rows.back()["train_loss"].get<double>(), rows.front()["train_loss"].get<double>());
  std::ifstream report_file(dir.file("run/report.html"));
  const std::string report((std::istreambuf_iterator<char>(report_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("<svg"), std::string::npos);
  EXPECT_NE(report.find("Confusion matrix"), std::string::npos);
  EXPECT_NE(report.find("Misclassified test images"), std::string::npos);
  for (const char* remote : {"src=\"http", "href=\"http", "<script", "<link", "url("}) {
    EXPECT_EQ(report.find(remote), std::string::npos) << "the report must not need the network: " << remote;
  }
  const checkpoint::LoadedCheckpoint ckpt = checkpoint::load_checkpoint(dir.file("run/last.safetensors"));
  EXPECT_EQ(ckpt.info.epoch, 6);
  EXPECT_EQ(ckpt.info.model.dim, 16);
  EXPECT_EQ(ckpt.info.class_names.size(), 10u);
  EXPECT_FALSE(ckpt.optimizer.empty());
  EXPECT_EQ(ckpt.weights.front().first, "pos_embed");  // timm names (mean pooling: no cls_token)
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/best.safetensors")));
  // The recipe's normalisation and milestones; without them, the data's statistics and none.
  EXPECT_EQ(ckpt.info.normalization.mean, std::vector<double>{0.1307});
  ASSERT_EQ(r.milestones.size(), 2u);
  EXPECT_EQ(r.milestones[0].first, 0.97);
  c.out_dir = dir.file("plain");
  c.epochs = 1;
  c.milestones.clear();
  c.normalization = {};
  EXPECT_TRUE(train(c).milestones.empty());
  const data::Dataset train_data = data::load_dataset(dir.file("data"), data::Split::Train, 1, 28);
  const data::Normalization computed = data::compute_normalization(train_data);
  EXPECT_EQ(checkpoint::load_checkpoint(dir.file("plain/last.safetensors")).info.normalization.mean, computed.mean);
  EXPECT_NE(computed.mean[0], 0.1307);
}

TEST(Trainer, ResumeEndsWithBitIdenticalWeights) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 160, 40);
  TrainConfig straight = tiny_train_config(dir.file("data"), dir.file("a"), 4);
  straight.model.dropout = 0.1;  // dropout, drop-path and augmentation randomness must replay too
  straight.model.drop_path = 0.1;
  straight.augment.rotate_degrees = 5;
  straight.augment.mixup_alpha = 0.2;
  straight.ema_decay = 0.9;
  train(straight);
  TrainConfig first = straight;  // the same run, interrupted after epoch 2
  first.out_dir = dir.file("b");
  first.stop_after_epoch = 2;
  EXPECT_EQ(train(first).epochs_run, 2);
  TrainConfig resumed = straight;
  resumed.out_dir = dir.file("b");
  resumed.resume = true;
  train(resumed);
  const checkpoint::LoadedCheckpoint a = checkpoint::load_checkpoint(dir.file("a/last.safetensors"));
  const checkpoint::LoadedCheckpoint b = checkpoint::load_checkpoint(dir.file("b/last.safetensors"));
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(a.weights[i].second.to_vector(), b.weights[i].second.to_vector()) << a.weights[i].first;
  }
  for (size_t i = 0; i < a.optimizer.size(); ++i) {
    EXPECT_EQ(a.optimizer[i].second.to_vector(), b.optimizer[i].second.to_vector()) << a.optimizer[i].first;
  }
  for (size_t i = 0; i < a.ema.size(); ++i) EXPECT_EQ(a.ema[i].second.to_vector(), b.ema[i].second.to_vector());
  EXPECT_EQ(metrics(dir.file("b")).size(), 4u);
}

// A hybrid's BatchNorm statistics are state like the weights: saved (raw and EMA), restored by
// --resume, so an interrupted run ends where the straight one does, bit for bit.
TEST(Trainer, AHybridResumesBitIdenticallyWithItsBatchNormStatistics) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 160, 40);
  TrainConfig straight = tiny_train_config(dir.file("data"), dir.file("a"), 3);
  straight.model.patch_size = 4;
  straight.model.conv_stages = 2;
  straight.model.conv_channels = 4;
  straight.model.conv_blocks = 1;
  straight.model.conv_stem_stride = 2;
  straight.ema_decay = 0.9;
  train(straight);
  TrainConfig first = straight;
  first.out_dir = dir.file("b");
  first.stop_after_epoch = 1;
  EXPECT_EQ(train(first).epochs_run, 1);
  TrainConfig resumed = straight;
  resumed.out_dir = dir.file("b");
  resumed.resume = true;
  train(resumed);
  const checkpoint::LoadedCheckpoint a = checkpoint::load_checkpoint(dir.file("a/last.safetensors"));
  const checkpoint::LoadedCheckpoint b = checkpoint::load_checkpoint(dir.file("b/last.safetensors"));
  ASSERT_EQ(a.weights.size(), b.weights.size());
  int buffers = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const std::string& name = a.weights[i].first;
    EXPECT_EQ(name, b.weights[i].first);
    EXPECT_EQ(a.weights[i].second.to_vector(), b.weights[i].second.to_vector()) << name;
    if (name.ends_with("running_mean")) {
      ++buffers;
      double moved = 0;
      for (double v : a.weights[i].second.to_vector()) moved += std::abs(v);
      EXPECT_GT(moved, 0.0) << name << " never left its initial zeros";
    }
  }
  EXPECT_EQ(buffers, 6);  // stem.bn; bn1, bn2 of the first block; bn1, bn2, downsample.bn of the second
  ASSERT_EQ(a.ema.size(), a.weights.size());
  for (size_t i = 0; i < a.ema.size(); ++i) {
    EXPECT_EQ(a.ema[i].first, a.weights[i].first);
    EXPECT_EQ(a.ema[i].second.to_vector(), b.ema[i].second.to_vector()) << a.ema[i].first;
  }
}

TEST(Trainer, NanLossStopsAndKeepsTheLastGoodCheckpoint) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  train(tiny_train_config(dir.file("data"), dir.file("run"), 1));
  const std::vector<uint8_t> before = testing::read_bytes(dir.file("run/last.safetensors"));
  TrainConfig exploding = tiny_train_config(dir.file("data"), dir.file("run"), 3);
  exploding.overwrite = true;  // a new run in the same folder: last.safetensors stays until replaced
  exploding.lr = 1e30;
  exploding.min_lr = 0;
  exploding.warmup_epochs = 0;
  try {
    train(exploding);
    FAIL() << "expected training to stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stopping without saving. The last good checkpoint is " + dir.file("run/last.safetensors")),
              std::string::npos)
        << what;
    // Step 0's update made the weights huge but finite; step 1's forward pass overflows.
    EXPECT_NE(what.find("[train] loss is nan (the forward pass overflowed; all weights are finite, the largest is '"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("at epoch 1 step 1;"), std::string::npos) << what;
  }
  EXPECT_EQ(testing::read_bytes(dir.file("run/last.safetensors")), before);
  EXPECT_NO_THROW(checkpoint::load_checkpoint(dir.file("run/last.safetensors")));
  // An update that overflows the weights themselves is caught at that step, naming the parameter.
  exploding.lr = 1e39;  // infinite in float32
  try {
    train(exploding);
    FAIL() << "expected training to stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[train] parameter '"), std::string::npos) << what;
    EXPECT_NE(what.find("' became non-finite in the update of epoch 1 step 0 (learning rate too high?); stopping "
                        "without saving"),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(testing::read_bytes(dir.file("run/last.safetensors")), before);
}

TEST(Trainer, SkipNonfiniteNeverSavesPoisonedWeights) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  TrainConfig healthy = tiny_train_config(dir.file("data"), dir.file("run"), 1);
  healthy.skip_nonfinite = true;
  train(healthy);
  EXPECT_EQ(metrics(dir.file("run")).back()["skipped_steps"].get<int64_t>(), 0);
  const std::vector<uint8_t> before = testing::read_bytes(dir.file("run/last.safetensors"));
  // A finite-loss step with lr 1e30 blows the weights up; later NaN steps are skipped, but the
  // epoch ends with unusable weights, so nothing is saved.
  TrainConfig c = tiny_train_config(dir.file("data"), dir.file("run"), 2);
  c.overwrite = true;
  c.lr = 1e30;
  c.min_lr = 0;
  c.warmup_epochs = 0;
  c.skip_nonfinite = true;
  try {
    train(c);
    FAIL() << "expected training to stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("became non-finite during epoch 1; stopping without saving") != std::string::npos ||
                what.find("test loss is nan after epoch 1: the weights are unusable; stopping without saving") !=
                    std::string::npos)
        << what;
  }
  EXPECT_EQ(testing::read_bytes(dir.file("run/last.safetensors")), before);
}

TEST(Trainer, ResumeRefusesMissingCheckpointAndDifferentModel) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  TrainConfig c = tiny_train_config(dir.file("data"), dir.file("run"), 1);
  c.resume = true;
  EXPECT_THROW(train(c), Error);
  c.resume = false;
  train(c);
  TrainConfig other = c;
  other.resume = true;
  other.epochs = 2;
  other.model.dim = 32;
  other.model_explicit = true;
  try {
    train(other);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("run/last.safetensors") + ": checkpoint is a different model"),
              std::string::npos)
        << e.what();
  }
}

TEST(Trainer, ConfigValidation) {
  TrainConfig c = digits_recipe();
  c.epochs = 0;
  EXPECT_THROW(c.validate(), Error);
  c = digits_recipe();
  c.optimizer = "lion";
  EXPECT_THROW(c.validate(), Error);
  c = digits_recipe();
  c.model.num_heads = 5;
  EXPECT_THROW(c.validate(), Error);
  c = digits_recipe();
  EXPECT_EQ(TrainConfig::from_json(c.to_json()).to_json(), c.to_json());
}

}  // namespace
}  // namespace vit::train
