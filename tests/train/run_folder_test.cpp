// The run folder against a careless or hostile user, through train::train: a new run refuses a
// folder that holds a run unless told to replace it (and then nothing of the old run passes for
// the new one's); one run at a time in a folder (its lock), released on every way out; paths and
// names that are not UTF-8 are refused or recorded safely before the first step, never after;
// a resumed run refuses flags that would change it and data that is not its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "data/image.h"
#include "support/files.h"
#include "support/tiny_train.h"
#include "train/run_lock.h"
#include "train/trainer.h"

namespace vit::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_train_config;

std::string error_of(const TrainConfig& c) {
  try {
    train(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RunFolder, ANewRunRefusesAFolderHoldingARunUnlessToldToReplaceIt) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  const std::string run = dir.file("run");
  TrainConfig c = tiny_train_config(dir.file("data"), run, 1);
  train(c);
  const auto last = testing::read_bytes(run + "/last.safetensors");
  const std::string metrics = read_text(run + "/metrics.jsonl");
  ASSERT_TRUE(fs::exists(run + "/best.safetensors"));
  EXPECT_EQ(error_of(c), "[train] " + run +
                             " already holds a run (last.safetensors, best.safetensors, metrics.jsonl, "
                             "report.html); continue it with --resume " +
                             run + ", start over with --overwrite (replaces it), or choose another --out");
  EXPECT_EQ(testing::read_bytes(run + "/last.safetensors"), last);
  EXPECT_EQ(read_text(run + "/metrics.jsonl"), metrics);
  // Refused before the data is read: a missing dataset does not get in first.
  TrainConfig elsewhere = c;
  elsewhere.data_dir = dir.file("missing");
  EXPECT_NE(error_of(elsewhere).find(run + " already holds a run"), std::string::npos);
  // Without a checkpoint there is nothing to resume: only --overwrite and --out are offered.
  fs::remove(run + "/last.safetensors");
  EXPECT_EQ(error_of(c), "[train] " + run +
                             " already holds a run (best.safetensors, metrics.jsonl, report.html); "
                             "start over with --overwrite (replaces it), or choose another --out");
  // An empty metrics.jsonl (a run stopped before its first epoch) holds nothing to lose.
  TempDir empty;
  std::ofstream(empty.file("metrics.jsonl")).close();
  TrainConfig fresh = tiny_train_config(dir.file("data"), empty.path(), 1);
  EXPECT_EQ(train(fresh).epochs_run, 1);
  // --overwrite and --resume contradict each other.
  TrainConfig both = c;
  both.resume = true;
  both.overwrite = true;
  testing::write_bytes(run + "/last.safetensors", last);
  EXPECT_NE(error_of(both).find("[train] --overwrite and --resume contradict each other"), std::string::npos);
}

TEST(RunFolder, OverwriteLeavesNothingOfTheOldRunToPassForTheNewOne) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  const std::string run = dir.file("run");
  train(tiny_train_config(dir.file("data"), run, 1));
  ASSERT_TRUE(fs::exists(run + "/best.safetensors"));
  const auto last = testing::read_bytes(run + "/last.safetensors");
  // A replacing run that fails in its first epoch: the old best, metrics and report are gone (the
  // old best would otherwise pass for the new run's); last.safetensors is replaced only by a save.
  TrainConfig exploding = tiny_train_config(dir.file("data"), run, 2);
  exploding.overwrite = true;
  exploding.lr = 1e39;  // infinite in float32: the first update fails
  EXPECT_NE(error_of(exploding).find("became non-finite in the update of epoch 1 step 0"), std::string::npos);
  EXPECT_FALSE(fs::exists(run + "/best.safetensors"));
  EXPECT_FALSE(fs::exists(run + "/report.html"));
  EXPECT_EQ(read_text(run + "/metrics.jsonl"), "");
  EXPECT_EQ(testing::read_bytes(run + "/last.safetensors"), last);
  // A replacing run that finishes: its own two epochs only.
  TrainConfig again = tiny_train_config(dir.file("data"), run, 2);
  again.overwrite = true;
  EXPECT_EQ(train(again).epochs_run, 2);
  std::ifstream in(run + "/metrics.jsonl");
  int rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  EXPECT_EQ(rows, 2);
}

TEST(RunFolder, OneRunAtATimeNamingTheHolder) {
  TempDir dir;
  const std::string run = dir.file("runs/x");
  {
    const RunLock held = RunLock::acquire(run);
    EXPECT_TRUE(fs::exists(run + "/.lock"));
    EXPECT_EQ(read_text(run + "/.lock"), std::to_string(::getpid()) + "\n");
    // flock locks are per open file: a second acquisition conflicts even in the same process.
    try {
      RunLock::acquire(run);
      FAIL() << "a second lock on the same folder";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "[train] " + run + " is in use by another vit train (pid " +
                                           std::to_string(::getpid()) + "); wait for it or choose another --out");
    }
    // A run refuses the locked folder before reading or writing anything in it.
    testing::write_toy_mnist(dir.file("data"), 64, 16);
    EXPECT_NE(error_of(tiny_train_config(dir.file("data"), run, 1)).find(run + " is in use by another vit train (pid "),
              std::string::npos);
    EXPECT_FALSE(fs::exists(run + "/metrics.jsonl"));
  }
  // Released: the lock file and the folders it created are gone again.
  EXPECT_FALSE(fs::exists(dir.file("runs")));
  // A lock file left by a killed run (its flock died with it) does not block.
  fs::create_directories(run);
  testing::write_bytes(run + "/.lock", {'9', '9', '9', '9', '9', '9', '9', '\n'});
  EXPECT_TRUE(RunLock::acquire(run).held());
}

TEST(RunFolder, TheLockIsReleasedOnEveryWayOutAndStaleTemporariesAreRemoved) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  const std::string run = dir.file("run");
  // A run that fails after taking the lock (its data is missing) releases it, and leaves no folder.
  EXPECT_NE(error_of(tiny_train_config(dir.file("missing"), run, 1)).find("[data]"), std::string::npos);
  EXPECT_FALSE(fs::exists(run));
  // A run that stops on a non-finite update releases it too.
  TrainConfig exploding = tiny_train_config(dir.file("data"), run, 1);
  exploding.lr = 1e39;
  EXPECT_NE(error_of(exploding).find("became non-finite"), std::string::npos);
  EXPECT_TRUE(RunLock::acquire(run).held());
  // The temporary files of a run killed mid-save are removed by the next run in the folder.
  train(tiny_train_config(dir.file("data"), dir.file("ok"), 1));
  for (const char* stale :
       {"last.safetensors.tmp.4242.0", "metrics.jsonl.tmp.4242.1", "report.html.tmp", "best.safetensors.tmp"}) {
    testing::write_bytes(dir.file("ok/") + stale, {1, 2, 3});
  }
  TrainConfig more = tiny_train_config(dir.file("data"), dir.file("ok"), 2);
  more.resume = true;
  EXPECT_EQ(train(more).epochs_run, 2);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.file("ok"))) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"best.safetensors", "last.safetensors", "metrics.jsonl", "report.html"}));
}

TEST(RunFolder, ADataPathThatIsNotUtf8IsRefusedBeforeTheFirstStep) {
  TempDir dir;
  const std::string data = dir.file(
      "donn\xE9"
      "es");  // Latin-1 "données"
  testing::write_toy_mnist(data, 64, 16);
  EXPECT_EQ(error_of(tiny_train_config(data, dir.file("run"), 1)),
            "[train] --data " + dir.file("donn\\xE9es") +
                ": the path is not valid UTF-8, and checkpoints record it (as JSON text) for --resume to find the data "
                "again; rename the folder, or point --data at a symlink with a UTF-8 name");
  EXPECT_FALSE(fs::exists(dir.file("run")));
  // The symlink the message suggests works.
  fs::create_directory_symlink(data, dir.file("donnees"));
  EXPECT_EQ(train(tiny_train_config(dir.file("donnees"), dir.file("run"), 1)).epochs_run, 1);
}

TEST(RunFolder, ClassNamesThatAreNotUtf8AreRecordedEscaped) {
  TempDir dir;
  // An image folder whose class sub-folders are named in Latin-1: "café" and "thé".
  const std::vector<std::string> classes = {"caf\xE9", "th\xE9"};
  for (const char* split : {"train", "test"}) {
    for (size_t k = 0; k < classes.size(); ++k) {
      const std::string folder = dir.file("data/") + split + "/" + classes[k];
      fs::create_directories(folder);
      for (int i = 0; i < 4; ++i) {
        data::Image image{1, 28, 28, std::vector<uint8_t>(28 * 28, static_cast<uint8_t>(40 + 120 * k + i))};
        data::write_png(folder + "/" + std::to_string(i) + ".png", image);
      }
    }
  }
  TrainConfig c = tiny_train_config(dir.file("data"), dir.file("run"), 1);
  c.normalization = {};
  c.batch_size = 4;
  EXPECT_EQ(train(c).epochs_run, 1);
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(dir.file("run/last.safetensors"));
  EXPECT_EQ(saved.info.class_names, (std::vector<std::string>{"caf\\xE9", "th\\xE9"}));
  EXPECT_NE(read_text(dir.file("run/report.html")).find("caf\\xE9"), std::string::npos);
  // And a checkpoint asked to record such text directly refuses it as a vit error naming the file.
  checkpoint::CheckpointInfo info = saved.info;
  info.class_names = classes;
  const auto model = checkpoint::model_from_checkpoint(saved);
  try {
    checkpoint::save_checkpoint(dir.file("raw.safetensors"), *model, info);
    FAIL() << "saved a checkpoint with non-UTF-8 class names";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "[checkpoint] " + dir.file("raw.safetensors") + ": cannot record the metadata as JSON (", 0),
              0u)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("raw.safetensors")));
}

TEST(RunFolder, ACorruptMetricsFileIsNamedNotThrownRaw) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  train(tiny_train_config(dir.file("data"), dir.file("run"), 1));
  testing::write_bytes(dir.file("run/metrics.jsonl"), {'{', 'o', 'o', 'p', 's', '\n'});
  TrainConfig more = tiny_train_config(dir.file("data"), dir.file("run"), 2);
  more.resume = true;
  EXPECT_EQ(error_of(more).rfind("[train] " + dir.file("run/metrics.jsonl") + ": line 1 is not a JSON object (", 0),
            0u);
}

TEST(RunFolder, ResumeRefusesGivenFlagsThatDisagreeAndTakesMovedData) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  const std::string run = dir.file("run");
  const TrainResult done = train(tiny_train_config(dir.file("data"), run, 1));
  // A finished run resumed: its real numbers, not zeros.
  TrainConfig again = tiny_train_config(dir.file("data"), run, 0);
  again.resume = true;
  const TrainResult complete = train(again);
  EXPECT_EQ(complete.epochs_run, 1);
  EXPECT_EQ(complete.final_test_accuracy, done.final_test_accuracy);
  EXPECT_EQ(complete.best_test_accuracy, done.best_test_accuracy);
  // A flag given explicitly that disagrees with the run (lr 3e-3) is refused; one that agrees is fine.
  TrainConfig lr = tiny_train_config(dir.file("data"), run, 2);
  lr.resume = true;
  lr.lr = 0.5;
  lr.given_flags = {"--resume", "--epochs", "--lr"};
  EXPECT_EQ(
      error_of(lr).rfind("[train] --resume " + run + ": --lr 0.5 (the run's 0.003) cannot change when resuming", 0),
      0u);
  lr.given_flags = {"--resume", "--epochs"};  // not given: the run's own value, as before
  const auto before = testing::read_bytes(run + "/last.safetensors");
  // Moved data is taken (and recorded), other data is refused naming both paths.
  fs::rename(dir.file("data"), dir.file("moved"));
  TrainConfig moved = tiny_train_config(dir.file("moved"), run, 2);
  moved.resume = true;
  moved.given_flags = {"--resume", "--data", "--epochs"};
  testing::write_toy_mnist(dir.file("other"), 48, 16);
  TrainConfig other = moved;
  other.data_dir = dir.file("other");
  EXPECT_EQ(error_of(other), "[train] --data " + dir.file("other") + " is not the data this run was trained on (" +
                                 dir.file("data") +
                                 "): 48 training images (the run's 64); resume with the run's data, "
                                 "or start a new run with another --out");
  EXPECT_EQ(testing::read_bytes(run + "/last.safetensors"), before);
  EXPECT_EQ(train(moved).epochs_run, 2);
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(run + "/last.safetensors");
  EXPECT_EQ(TrainConfig::from_json(saved.info.train_config_json).data_dir, dir.file("moved"));
  EXPECT_NE(saved.info.dataset_json.find("\"train_images\":64"), std::string::npos) << saved.info.dataset_json;
}

}  // namespace
}  // namespace vit::train
