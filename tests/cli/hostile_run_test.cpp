// `vit train` and its run folder against a careless or hostile user, end to end: a finished run
// is never replaced without --overwrite; two runs never share a folder; a path that is not UTF-8
// is refused at once, not after an epoch of training; --resume takes what may change (data that
// moved, more epochs, threads), refuses the rest naming both values, and reports a finished run's
// real numbers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::read_text;
using testing::spawn;
using testing::TempDir;
using testing::vit;
using testing::wait_for;

const std::string kTiny = " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 --batch-size 32 --threads 1";

// Waits up to a minute for cond; false on timeout.
template <class Cond>
bool wait_until(Cond cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Files whose names say they are temporary (FILE.tmp...).
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp") != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

TEST(HostileRun, ANewRunInAFolderHoldingARunIsRefusedUnlessOverwrite) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 96, 32);
  const std::string run = dir.file("run");
  const std::string args = "train --data " + dir.file("data") + " --out " + run + kTiny;
  ASSERT_EQ(vit(args + " --epochs 1").exit_code, 0);
  const auto last = testing::read_bytes(run + "/last.safetensors");
  const std::string metrics = read_text(run + "/metrics.jsonl");
  // The same command again: refused, naming the way to continue and the way to replace.
  const CommandResult again = vit(args + " --epochs 1");
  expect_error(again, "[train] " + run + " already holds a run (last.safetensors, ");
  EXPECT_NE(again.out.find("report.html); continue it with --resume " + run +
                           ", start over with --overwrite (replaces it), or choose another --out"),
            std::string::npos)
      << again.out;
  // Before the data is read (a wrong --data does not get in first), and nothing is touched.
  expect_error(vit("train --data " + dir.file("missing") + " --out " + run + kTiny),
               "[train] " + run + " already holds");
  EXPECT_EQ(testing::read_bytes(run + "/last.safetensors"), last);
  EXPECT_EQ(read_text(run + "/metrics.jsonl"), metrics);
  // --overwrite replaces it: a new run of 2 epochs, with its own metrics only.
  const CommandResult replaced = vit(args + " --overwrite --epochs 2");
  ASSERT_EQ(replaced.exit_code, 0) << replaced.out;
  EXPECT_NE(replaced.out.find("epoch 2/2"), std::string::npos) << replaced.out;
  const std::string rows = read_text(run + "/metrics.jsonl");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 2) << rows;
  // --overwrite with --resume is a contradiction, refused.
  expect_error(vit("train --resume " + run + " --overwrite"), "[train] --overwrite and --resume contradict each other");
}

TEST(HostileRun, TwoRunsInOneFolderTheSecondRefusesNamingTheFirstsPid) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 96, 32);
  const std::string run = dir.file("run"), log = dir.file("first.log");
  // A long first run, with a checkpoint after every step.
  const pid_t first = spawn({"train",
                             "--data",
                             dir.file("data"),
                             "--out",
                             run,
                             "--conv-stages",
                             "0",
                             "--patch-size",
                             "7",
                             "--dim",
                             "16",
                             "--depth",
                             "1",
                             "--heads",
                             "2",
                             "--batch-size",
                             "32",
                             "--threads",
                             "1",
                             "--epochs",
                             "1000",
                             "--checkpoint-every",
                             "1"},
                            log);
  const std::string pid = std::to_string(first);
  ASSERT_TRUE(wait_until([&] { return read_text(run + "/.lock") == pid + "\n"; })) << read_text(log);
  // The second run, whatever it asks for, refuses before touching anything.
  const std::string in_use =
      "[train] " + run + " is in use by another vit train (pid " + pid + "); wait for it or choose another --out";
  const std::string second = "train --data " + dir.file("data") + kTiny + " --epochs 1 ";
  expect_error(vit(second + "--out " + run), in_use);
  expect_error(vit(second + "--out " + run + " --overwrite"), in_use);
  expect_error(vit("train --resume " + run + " --threads 1"), in_use);
  // The first goes on undisturbed, and stops cleanly on Ctrl-C, once its handler is in place.
  ASSERT_TRUE(wait_until([&] { return fs::exists(run + "/last.safetensors"); })) << read_text(log);
  ::kill(first, SIGINT);
  ASSERT_EQ(wait_for(first), 130) << read_text(log);
  const std::string text = read_text(log);
  EXPECT_NE(text.find("saved " + run + "/last.safetensors; continue with: vit train --resume " + run),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("error:"), std::string::npos) << text;
  // Released: no lock file, no temporary file, and the next run gets past the lock (to the
  // refusal to replace a run, which comes after it).
  EXPECT_FALSE(fs::exists(run + "/.lock"));
  EXPECT_EQ(temporaries(run), std::vector<std::string>{});
  expect_error(vit(second + "--out " + run), "[train] " + run + " already holds a run");
}

TEST(HostileRun, ADataPathThatIsNotUtf8IsRefusedAtOnce) {
  TempDir dir;
  const std::string data = dir.file(
      "donn\xE9"
      "es");
  testing::write_toy_mnist(data, 96, 32);
  const CommandResult r = vit("train --data '" + data + "' --out " + dir.file("run") + kTiny + " --epochs 1");
  expect_error(r, "[train] --data " + dir.file("donn\\xE9es") + ": the path is not valid UTF-8");
  EXPECT_EQ(r.out.find("epoch 1/1"), std::string::npos) << "refused before training";
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

// "test accuracy X% (best Y%)" from a run's output.
std::string accuracies(const std::string& out) {
  const size_t at = out.find("test accuracy ", out.find("done: "));
  return at == std::string::npos ? "(none)" : out.substr(at, out.find(')', at) + 1 - at);
}

TEST(HostileRun, ResumeTakesWhatMayChangeAndRefusesTheRestNamingBothValues) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 96, 32);
  const std::string run = dir.file("run");
  const CommandResult first = vit("train --data " + dir.file("data") + " --out " + run + kTiny + " --epochs 1");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  // Resuming a finished run: its real final and best accuracy, and that there is nothing to do.
  const CommandResult finished = vit("train --resume " + run);
  ASSERT_EQ(finished.exit_code, 0) << finished.out;
  EXPECT_NE(finished.out.find("the run in " + run + " is already complete (1 of 1 epochs): " + accuracies(first.out)),
            std::string::npos)
      << finished.out << "\nfirst run: " << first.out;
  // What would change the run is refused, naming each flag with both values and what may change.
  const CommandResult lr = vit("train --resume " + run + " --epochs 2 --lr 0.5 --batch-size 8 --seed 0");
  expect_error(lr, "[train] --resume " + run +
                       ": --batch-size 8 (the run's 32); --lr 0.5 (the run's 0.003) cannot "
                       "change when resuming");
  EXPECT_NE(lr.out.find("A resumed run takes only --data (the same data, moved), --epochs (to extend it), --threads, "
                        "--checkpoint-every"),
            std::string::npos)
      << lr.out;
  expect_error(vit("train --resume " + run + " --epochs 2 --dropout 0.3"),
               "[train] " + run +
                   "/last.safetensors: checkpoint is a different model than requested: dropout 0.3 "
                   "(the checkpoint's 0)");
  // Every model flag is covered (by the field it sets, not a list of flags), and one that agrees
  // with the run is not a change.
  expect_error(vit("train --resume " + run + " --epochs 2 --eps 0.001 --dim 16"),
               "[train] " + run +
                   "/last.safetensors: checkpoint is a different model than requested: eps 0.001 (the checkpoint's "
                   "1e-06); resume without model flags");
  expect_error(vit("train --resume " + run + " --epochs 2 --no-augment"),
               "[train] --resume " + run +
                   ": --no-augment: crop_padding 0 (the run's 1), hflip false (the run's true) cannot change when "
                   "resuming");
  expect_error(vit("train --resume " + run + " --out " + dir.file("elsewhere")),
               "[train] --out " + dir.file("elsewhere") + " with --resume " + run +
                   ": a resumed run continues in its own folder");
  // The dataset moved: --data points to it; the flags the run was started with are accepted as
  // they agree, and so is its own folder given again as --out.
  fs::rename(dir.file("data"), dir.file("moved"));
  expect_error(vit("train --resume " + run + " --epochs 2"),
               "[train] --resume " + run + ": the run's data " + dir.file("data") +
                   " is not there any more; if it moved, give its new place with --data");
  const CommandResult moved = vit("train --resume " + run + " --out " + run + "/ --data " + dir.file("moved") + kTiny +
                                  " --epochs 2 --checkpoint-every 1");
  ASSERT_EQ(moved.exit_code, 0) << moved.out;
  EXPECT_NE(moved.out.find("data: " + dir.file("moved") + " (the run's data, moved from " + dir.file("data") + ")"),
            std::string::npos)
      << moved.out;
  EXPECT_NE(moved.out.find("epoch 2/2"), std::string::npos) << moved.out;
  // Other data is refused, naming both paths and what differs, before any training.
  testing::write_toy_mnist(dir.file("other"), 64, 32);
  const CommandResult other = vit("train --resume " + run + " --data " + dir.file("other") + " --epochs 3");
  expect_error(other, "[train] --data " + dir.file("other") + " is not the data this run was trained on (" +
                          dir.file("moved") + "): 64 training images (the run's 96)");
  // So is the run's own data changed in place (one pixel).
  auto pixels = testing::read_bytes(dir.file("moved/train-images-idx3-ubyte"));
  pixels.back() ^= 0xff;
  testing::write_bytes(dir.file("moved/train-images-idx3-ubyte"), pixels);
  expect_error(vit("train --resume " + run + " --epochs 3"),
               "[train] " + dir.file("moved") +
                   " is not the data this run was trained on any more: the same numbers "
                   "of images, but different pixels or labels");
}

}  // namespace
}  // namespace vit
