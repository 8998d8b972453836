// What a run records and what loading it gives back (issue 29): the checkpoint says which weights
// the run evaluated (its EMA when it kept one) and loading defaults to those; best.safetensors is
// written whenever an epoch ends (a run stuck at 0% has one too); a preset's class count is a
// default (the head takes the data's classes unless --num-classes sets it); class names that are
// not UTF-8 are recorded escaped, and the data trained on is the data `vit eval` matches.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "data/image.h"
#include "infer/load_model.h"
#include "support/files.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_train.h"
#include "train/epoch_end.h"
#include "train/run_setup.h"
#include "train/train_options.h"
#include "train/trainer.h"
#include "train/utf8.h"

namespace vit::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_train_config;

// An image folder with these classes in train/ and test/, 4 grey 28x28 images each.
void write_folder(const std::string& dir, const std::vector<std::string>& classes) {
  for (const char* split : {"train", "test"}) {
    for (size_t k = 0; k < classes.size(); ++k) {
      const std::string folder = dir + "/" + split + "/" + classes[k];
      fs::create_directories(folder);
      for (int i = 0; i < 4; ++i) {
        data::Image image{1, 28, 28, std::vector<uint8_t>(28 * 28, static_cast<uint8_t>(30 + 70 * k + i))};
        data::write_png(folder + "/" + std::to_string(i) + ".png", image);
      }
    }
  }
}

bool same(const model::NamedTensors& a, const model::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.to_vector() != b[i].second.to_vector()) return false;
  }
  return true;
}

TEST(Weights, TheCheckpointSaysWhichTheRunEvaluatedAndLoadingDefaultsToThem) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  TrainConfig c = tiny_train_config(dir.file("data"), dir.file("ema"), 1);
  c.ema_decay = 0.5;
  train(c);
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(dir.file("ema/best.safetensors"));
  EXPECT_EQ(saved.info.evaluated, "ema");
  ASSERT_FALSE(saved.ema.empty());
  ASSERT_FALSE(same(saved.ema, saved.weights));
  // load_model: the EMA weights by default (as the run evaluated), the raw ones when asked.
  const infer::LoadedModel recorded = infer::load_model(dir.file("ema/best.safetensors"));
  EXPECT_TRUE(recorded.ema);
  EXPECT_EQ(recorded.weights_note, "EMA weights, as the run evaluated (--raw: the raw weights)");
  EXPECT_TRUE(same(recorded.model->state_dict(), saved.ema));
  infer::LoadSettings raw_weights, ema_weights;
  raw_weights.weights = infer::WeightSet::Raw;
  ema_weights.weights = infer::WeightSet::Ema;
  const infer::LoadedModel raw = infer::load_model(dir.file("ema/best.safetensors"), raw_weights);
  EXPECT_FALSE(raw.ema);
  EXPECT_EQ(raw.weights_note, "raw weights (--raw); the run evaluated its EMA weights");
  EXPECT_TRUE(same(raw.model->state_dict(), saved.weights));
  EXPECT_TRUE(same(checkpoint::model_from_checkpoint(saved)->state_dict(), saved.ema));
  // The accuracy training printed is the one the default load gives.
  data::Dataset test = data::load_dataset(dir.file("data"), data::Split::Test, 1, 28);
  const EvalResult again = evaluate(*recorded.model, test, saved.info.normalization, 16);
  const std::string metrics = testing::read_text_file(dir.file("ema/metrics.jsonl"));
  const double logged = nlohmann::json::parse(metrics.substr(0, metrics.find('\n'))).at("test_acc").get<double>();
  EXPECT_DOUBLE_EQ(again.top1, logged);

  // A run without EMA records its raw weights; asking for EMA is refused by name.
  train(tiny_train_config(dir.file("data"), dir.file("raw"), 1));
  const checkpoint::LoadedCheckpoint plain = checkpoint::load_checkpoint(dir.file("raw/last.safetensors"));
  EXPECT_EQ(plain.info.evaluated, "raw");
  EXPECT_EQ(infer::load_model(dir.file("raw/last.safetensors")).weights_note, "");
  EXPECT_THROW(infer::load_model(dir.file("raw/last.safetensors"), ema_weights), Error);
}

TEST(Weights, BestIsWrittenWhenAnEpochEndsEvenAtZeroPercent) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  train::Run run = start_or_resume(tiny_train_config(dir.file("data"), dir.file("run"), 1));
  run.files.start_fresh();
  plan(run);
  run.step = 2;  // the epoch's two steps taken
  EpochResult trained;
  trained.start = Clock::now();
  trained.train_seconds = 1.0;
  EvalResult zero;  // an EMA that has not caught up: 0% of the test images
  zero.count = 16;
  zero.loss = 2.3;
  zero.confusion.assign(10, std::vector<int64_t>(10, 0));
  zero.per_class_accuracy.assign(10, 0.0);
  zero.predictions.assign(16, 9);
  zero.confidence.assign(16, 0.5f);
  ::testing::internal::CaptureStdout();
  std::string error;
  try {
    end_epoch(run, 0, trained, zero);
    print_summary(run);
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(error, "");
  EXPECT_TRUE(fs::exists(dir.file("run/best.safetensors")));  // "wrote" is true
  EXPECT_NE(out.find("best.safetensors: epoch 1, 0.00%"), std::string::npos) << out;
}

TEST(ClassNames, APresetsClassCountIsADefaultTheDataSetsTheHead) {
  TempDir dir;
  write_folder(dir.file("data"), {"bird", "cat", "dog"});
  auto run_with = [&](std::vector<std::string> flags) {
    TrainArgs args = parse_train_flags(flags);
    TrainConfig c = make_train_config(args);
    c.model.patch_size = 7;
    c.model.dim = 16;
    c.model.depth = 1;
    c.model.num_heads = 2;
    c.threads = 1;
    c.progress = 0;
    train(c);
    return checkpoint::load_checkpoint(c.out_dir + "/last.safetensors");
  };
  // vit_digits has 10 classes; the folder 3: a 3-way head, no invented names '3'..'9'.
  const auto from_data =
      run_with({"--preset", "vit_digits", "--data", dir.file("data"), "--epochs", "1", "--out", dir.file("a")});
  EXPECT_EQ(from_data.info.model.num_classes, 3);
  EXPECT_EQ(from_data.info.class_names, (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(infer::load_model(dir.file("a/last.safetensors")).class_names,
            (std::vector<std::string>{"bird", "cat", "dog"}));
  // --num-classes given: the head the user asked for.
  const auto asked = run_with({"--preset", "vit_digits", "--num-classes", "5", "--data", dir.file("data"), "--epochs",
                               "1", "--out", dir.file("b")});
  EXPECT_EQ(asked.info.model.num_classes, 5);
  // Resuming with the preset named again keeps the run's head.
  const auto resumed = run_with({"--resume", dir.file("a"), "--preset", "vit_digits", "--epochs", "2"});
  EXPECT_EQ(resumed.info.model.num_classes, 3);
  EXPECT_EQ(resumed.info.epoch, 2);
}

TEST(ClassNames, TrainingAndEvalEscapeNonUtf8NamesAlike) {
  TempDir dir;
  write_folder(dir.file("data"), {"caf\xE9", "th\xE9"});
  data::Dataset d = data::load_dataset(dir.file("data"), data::Split::Test, 1, 28);
  EXPECT_EQ(escape_class_names(d), (std::vector<std::string>{"caf\\xE9", "th\\xE9"}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"caf\\xE9", "th\\xE9"}));
}

}  // namespace
}  // namespace vit::train
