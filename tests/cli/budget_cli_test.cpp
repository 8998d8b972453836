// `vit train` with a time budget, a step count and a validation split (issue 13), end to end:
// a budgeted run times itself, fixes and prints its steps, records them, and `--steps N` reruns
// it bit for bit; a schedule in steps ends inside its last epoch; --resume keeps it; --val-split
// evaluates on held-out training images; each preset brings its recipe; and bad values (a budget
// of 0 or "10x", a split as large as the training set, a dataset without its test files, label
// files that disagree with their images) are refused naming the value, with nothing written.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "checkpoint/checkpoint.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "train/trainer.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

// A tiny model for 8x8 grey images on one thread.
// The plain preset (a recipe of its own; tiny_steps builds the same run as a library config).
const std::string kModel =
    " --preset vit_fashion --image-size 8 --patch-size 4 --dim 8 --depth 1 --heads 2 --batch-size 4 --threads 1";

std::vector<nlohmann::json> metrics(const std::string& run) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

train::TrainConfig saved_config(const std::string& checkpoint) {
  return train::TrainConfig::from_json(checkpoint::load_checkpoint(checkpoint).info.train_config_json);
}

// kModel's run as a library config: the Fashion-MNIST recipe on the tiny model, `steps` steps.
train::TrainConfig tiny_steps(const std::string& data, const std::string& out, int64_t steps) {
  train::TrainConfig c = train::recipe_for("vit_fashion");
  c.data_dir = data;
  c.out_dir = out;
  c.time_budget = 0;
  c.steps = steps;
  c.model.image_size = 8;
  c.model.patch_size = 4;
  c.model.dim = 8;
  c.model.depth = 1;
  c.model.num_heads = 2;
  c.batch_size = 4;
  c.threads = 1;
  c.progress = 0;
  return c;
}

// The two checkpoints hold the same weights, bit for bit.
void expect_same_weights(const std::string& a_path, const std::string& b_path) {
  const auto a = checkpoint::load_checkpoint(a_path);
  const auto b = checkpoint::load_checkpoint(b_path);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const Tensor& x = a.weights[i].second;
    const Tensor& y = b.weights[i].second;
    ASSERT_EQ(x.numel(), y.numel());
    EXPECT_EQ(0, std::memcmp(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()) * sizeof(float)))
        << a.weights[i].first;
  }
}

TEST(TimeBudget, ARunFixesItsStepsRecordsThemAndStepsRerunsItExactly) {
  TempDir dir;
  const std::string data = dir.file("data");
  testing::write_toy_mnist(data, 40, 12, 8);  // 10 steps per epoch
  const CommandResult r = vit("train --data " + data + " --out " + dir.file("a") + " --time-budget 3" + kModel);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("-> (\\d+) steps = [0-9.]+ epochs, fixed \\(rerun exactly with "
                                           "--steps (\\d+)\\)")))
      << r.out;
  const int64_t planned = std::stoll(m[1]);
  EXPECT_EQ(m[1], m[2]);
  EXPECT_GE(planned, 1);
  // The run keeps to its budget (loosely: the machine is shared; the note has the measured figures).
  std::smatch used;
  ASSERT_TRUE(std::regex_search(r.out, used, std::regex("time budget 3s: used ([0-9.]+) s"))) << r.out;
  EXPECT_LT(std::stod(used[1]), 3 * 3.0) << r.out;
  const train::TrainConfig saved = saved_config(dir.file("a/last.safetensors"));
  EXPECT_EQ(saved.time_budget, 3.0);
  const int64_t steps = saved.steps;
  const std::vector<nlohmann::json> rows = metrics(dir.file("a"));
  ASSERT_EQ(static_cast<int64_t>(rows.size()), (steps + 9) / 10) << r.out;  // the last epoch may be partial
  EXPECT_EQ(rows.back()["step"].get<int64_t>(), steps);
  if (!saved.schedule.empty()) {
    // The machine's speed drifted and the run re-planned its length: said, and recorded from the
    // first plan on (tests/optim checks the schedule itself; the test below, its resume).
    EXPECT_NE(r.out.find("re-planned the "), std::string::npos) << r.out;
    EXPECT_EQ(saved.schedule.front(), (std::vector<int64_t>{0, planned}));
    EXPECT_EQ(saved.schedule.back()[1], steps);
    return;
  }
  EXPECT_EQ(steps, planned);
  // The same schedule by its step count: the same weights, bit for bit (timing changed nothing).
  const CommandResult again =
      vit("train --data " + data + " --out " + dir.file("b") + " --steps " + std::to_string(steps) + kModel);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  expect_same_weights(dir.file("a/last.safetensors"), dir.file("b/last.safetensors"));
}

TEST(TimeBudget, StepsEndInsideTheLastEpochAndResumeKeepsThem) {
  TempDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  testing::write_toy_mnist(data, 40, 12, 8);  // 10 steps per epoch
  const CommandResult full = vit("train --data " + data + " --out " + dir.file("full") + " --steps 23" + kModel);
  ASSERT_EQ(full.exit_code, 0) << full.out;
  EXPECT_NE(full.out.find("training 23 steps = 2.30 epochs of 10 steps"), std::string::npos) << full.out;
  // The same run stopped after its first epoch (as if interrupted), then resumed by the command.
  train::TrainConfig c = tiny_steps(data, run, 23);
  c.stop_after_epoch = 1;
  train::train(c);
  ASSERT_EQ(metrics(run).size(), 1u);
  expect_error(vit("train --resume " + run + " --epochs 9"),
               "[train] --resume " + run +
                   ": this run's schedule is 23 steps (fixed by its time budget or --steps); --epochs cannot extend "
                   "it. Start a new run to train longer");
  expect_error(vit("train --resume " + run + " --steps 30"),
               "[train] --resume " + run + ": --steps 30 (the run's 23) cannot change when resuming");
  const CommandResult resumed = vit("train --resume " + run + " --threads 1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  const std::vector<nlohmann::json> rows = metrics(run);
  ASSERT_EQ(rows.size(), 3u) << resumed.out;
  EXPECT_EQ(rows[0]["step"], 10);
  EXPECT_EQ(rows[1]["step"], 20);
  EXPECT_EQ(rows[2]["step"], 23);
  EXPECT_EQ(checkpoint::load_checkpoint(run + "/last.safetensors").info.step, 23);
  // Resumed or not, the same weights.
  expect_same_weights(run + "/last.safetensors", dir.file("full/last.safetensors"));
}

// A run re-planned by its time budget (TrainConfig::schedule) resumes on the same schedule:
// stopped after its first epoch and resumed, it ends with the weights of the run never stopped.
TEST(TimeBudget, AReplannedScheduleIsRecordedAndResumed) {
  TempDir dir;
  const std::string data = dir.file("data");
  testing::write_toy_mnist(data, 40, 12, 8);  // 10 steps per epoch
  auto config = [&](const std::string& out) {
    train::TrainConfig c = tiny_steps(data, out, 23);
    c.schedule = {{0, 30}, {10, 23}};
    return c;
  };
  train::train(config(dir.file("full")));
  train::TrainConfig stopped = config(dir.file("run"));
  stopped.stop_after_epoch = 1;
  train::train(stopped);
  const CommandResult resumed = vit("train --resume " + dir.file("run") + " --threads 1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  const auto a = checkpoint::load_checkpoint(dir.file("run/last.safetensors"));
  EXPECT_EQ(train::TrainConfig::from_json(a.info.train_config_json).schedule,
            (std::vector<std::vector<int64_t>>{{0, 30}, {10, 23}}));
  ASSERT_EQ(a.info.step, 23);
  expect_same_weights(dir.file("run/last.safetensors"), dir.file("full/last.safetensors"));
  // A schedule that does not end at the run's steps is refused.
  train::TrainConfig bad = config(dir.file("bad"));
  bad.schedule = {{0, 30}, {10, 25}};
  try {
    train::train(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[train] the re-planned schedule ends at step 25 but the run has 23 steps");
  }
}

TEST(ValSplit, EvaluatesOnHeldOutTrainingImages) {
  TempDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  testing::write_toy_mnist(data, 40, 12, 8);
  const CommandResult r = vit("train --data " + data + " --out " + run + " --val-split 16 --epochs 1" + kModel);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("validation: 16 of the 40 training images held out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("val loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done: validation accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training 1 epochs x 6 steps"), std::string::npos) << r.out;  // 24 images left, batch 4
  const std::string report = testing::read_text(run + "/report.html");
  EXPECT_NE(report.find("16 validation images"), std::string::npos);
  expect_error(vit("train --data " + data + " --out " + dir.file("big") + " --val-split 40 --epochs 1" + kModel),
               "[train] --val-split 40: the training set " + data +
                   "/train-images-idx3-ubyte has only 40 images (some must be left to train on)");
  EXPECT_FALSE(fs::exists(dir.file("big")));
}

TEST(TimeBudget, BadValuesAreRefusedNamingThemWithNothingWritten) {
  TempDir dir;
  const std::string data = dir.file("data"), out = dir.file("run");
  testing::write_toy_mnist(data, 40, 12, 8);
  const std::string expected = "expected seconds or numbers with units h, m, s (600, 10m, 1h, 1h30m, 90s)";
  expect_error(vit("train --data " + data + " --out " + out + " --time-budget 10x" + kModel),
               "[train] --time-budget '10x': " + expected);
  expect_error(vit("train --data " + data + " --out " + out + " --time-budget 0" + kModel),
               "[train] --time-budget '0': must be a positive duration");
  EXPECT_NE(vit("train --data " + data + " --out " + out + " --time-budget 10m --epochs 3" + kModel).exit_code, 0);
  expect_error(vit("train --data " + data + " --out " + out + " --time-budget nan" + kModel),
               "[train] --time-budget 'nan': " + expected);
  expect_error(vit("train --data " + data + " --out " + out + " --time-budget ''" + kModel),
               "[train] --time-budget '': " + expected);
  expect_error(vit("train --data " + data + " --out " + out + " --steps 0" + kModel),
               "[train] --steps must be >= 1, got 0");
  expect_error(vit("train --data " + data + " --out " + out + " --steps -3" + kModel),
               "[train] --steps must be >= 1, got -3");
  expect_error(vit("train --data " + data + " --out " + out + " --val-split -1 --epochs 1" + kModel),
               "[train] --val-split must be >= 0, got -1");
  expect_error(vit("train --data " + data + " --out " + out + " --erase 2 --epochs 1" + kModel),
               "[train] --erase must be in [0, 1], got 2");
  expect_error(vit("train --data " + data + " --out " + out + " --erase nan --epochs 1" + kModel),
               "[train] --erase: must be a number, got 'nan'");
  EXPECT_FALSE(fs::exists(out));
  // A budget too short for one step and an evaluation.
  const CommandResult tiny =
      vit("train --data " + data + " --out " + dir.file("short") + " --time-budget 0.001" + kModel);
  EXPECT_NE(tiny.exit_code, 0);
  EXPECT_NE(tiny.out.find("error: [train] --time-budget 0.001s: too short for one step and an evaluation"),
            std::string::npos)
      << tiny.out;
  EXPECT_FALSE(fs::exists(dir.file("short/last.safetensors")));
  // A training set of a single batch is timed on that batch (nothing to leave untimed).
  testing::write_toy_mnist(dir.file("one_batch"), 4, 4, 8);
  const CommandResult one =
      vit("train --data " + dir.file("one_batch") + " --out " + dir.file("one") + " --time-budget 1" + kModel);
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_NE(one.out.find("(timed over 1 batches)"), std::string::npos) << one.out;
  // A dataset folder with only its training files.
  fs::create_directories(dir.file("train_only"));
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"})
    fs::copy_file(data + "/" + f, dir.file("train_only/") + f);
  const CommandResult only = vit("train --data " + dir.file("train_only") + " --out " + out + " --epochs 1" + kModel);
  EXPECT_NE(only.exit_code, 0) << only.out;
  EXPECT_NE(only.out.find("t10k"), std::string::npos) << only.out;
  EXPECT_FALSE(fs::exists(out));
  // Label files whose count differs from the image file's.
  fs::copy(data, dir.file("mismatch"));
  testing::write_toy_mnist(dir.file("other"), 41, 12, 8);
  fs::copy_file(dir.file("other/train-labels-idx1-ubyte"), dir.file("mismatch/train-labels-idx1-ubyte"),
                fs::copy_options::overwrite_existing);
  const CommandResult mismatch = vit("train --data " + dir.file("mismatch") + " --out " + out + " --epochs 1" + kModel);
  EXPECT_NE(mismatch.exit_code, 0) << mismatch.out;
  EXPECT_NE(mismatch.out.find("41"), std::string::npos) << mismatch.out;
  EXPECT_NE(mismatch.out.find("40"), std::string::npos) << mismatch.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Recipes, APresetBringsItsRecipeAndFlagsApplyOnTop) {
  TempDir dir;
  const std::string data = dir.file("data");
  testing::write_toy_mnist(data, 16, 8, 28);
  // vit_digits: the digits recipe (EMA 0.995, small affine jitter), --lr on top of it.
  const CommandResult digits = vit("train --preset vit_digits --data " + data + " --out " + dir.file("d") +
                                   " --epochs 1 --lr 0.001 --threads 1 --batch-size 8");
  ASSERT_EQ(digits.exit_code, 0) << digits.out;
  const train::TrainConfig d = saved_config(dir.file("d/last.safetensors"));
  EXPECT_EQ(d.ema_decay, 0.995);
  EXPECT_EQ(d.augment.rotate_degrees, 8.0);
  EXPECT_EQ(d.lr, 0.001);
  EXPECT_EQ(d.batch_size, 8);
  EXPECT_EQ(d.time_budget, 0.0);
  // No preset: the Fashion-MNIST recipe (flip + crop, no rotation); --epochs replaces its budget.
  const CommandResult fashion =
      vit("train --data " + data + " --out " + dir.file("f") + " --epochs 1 --threads 1 --batch-size 8");
  ASSERT_EQ(fashion.exit_code, 0) << fashion.out;
  const auto f = checkpoint::load_checkpoint(dir.file("f/last.safetensors"));
  const train::TrainConfig fc = train::TrainConfig::from_json(f.info.train_config_json);
  EXPECT_TRUE(fc.augment.hflip);
  EXPECT_EQ(fc.augment.rotate_degrees, 0.0);
  EXPECT_EQ(fc.time_budget, 0.0);
  EXPECT_EQ(f.info.model.name, "vit_hybrid_fashion");  // the main job's model: convolutions, then the blocks
  EXPECT_EQ(f.info.model.conv_stages, 2);
  EXPECT_EQ(f.info.model.patch_size, 4);
  EXPECT_EQ(f.info.model.drop_path, 0.0);
}

}  // namespace
}  // namespace vit
