// Crash safety of `vit train`, end to end: SIGKILL at random moments never leaves an unreadable
// checkpoint and resuming reaches bit-identical weights; Ctrl-C saves and exits cleanly; a
// full disk (a file-size limit) during a save keeps the previous checkpoint and stops clearly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::spawn;
using testing::TempDir;
using testing::wait_for;
using Clock = std::chrono::steady_clock;

// A small run with every source of randomness on (dropout, drop-path, augmentation, EMA) and a
// checkpoint after every step, so kills land mid-epoch, mid-save and between saves.
std::vector<std::string> train_args(const std::string& data, const std::string& out) {
  return {
      "train", "--data",    data,  "--out",       out,   "--conv-stages",      "0", "--patch-size", "7",  "--dim",
      "16",    "--depth",   "2",   "--heads",     "2",   "--epochs",           "6", "--batch-size", "16", "--threads",
      "1",     "--dropout", "0.1", "--drop-path", "0.1", "--checkpoint-every", "1"};
}

// Files whose names say they are temporary (FILE.tmp.<pid>.<n>): none may outlive a run.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp") != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

// Every tensor (weights, optimiser state, EMA) must be bit-identical.
void expect_same_tensors(const std::string& a, const std::string& b) {
  const io::WeightsFile x = io::load_safetensors(a), y = io::load_safetensors(b);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    const Tensor& tx = x.tensors[i].second;
    const Tensor& ty = y.get(x.tensors[i].first);
    ASSERT_EQ(tx.shape(), ty.shape()) << x.tensors[i].first;
    EXPECT_EQ(std::memcmp(tx.raw_data(), ty.raw_data(), tx.numel() * dtype_size(tx.dtype())), 0)
        << "tensor " << x.tensors[i].first << " differs";
  }
}

// Per-epoch numbers that must not depend on interruptions (times do).
std::vector<std::string> epoch_numbers(const std::string& metrics_path) {
  std::vector<std::string> rows;
  std::ifstream in(metrics_path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    rows.push_back(j["train_loss"].dump() + " " + j["train_acc"].dump() + " " + j["test_loss"].dump() + " " +
                   j["test_acc"].dump());
  }
  return rows;
}

class CrashSafety : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    testing::write_toy_mnist(dir_->file("data"), 192, 48);
    const auto start = Clock::now();
    const int code = wait_for(spawn(train_args(dir_->file("data"), dir_->file("reference")), dir_->file("ref.log")));
    reference_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
    ASSERT_EQ(code, 0) << read_text(dir_->file("ref.log"));
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
  static double reference_seconds_;
};
TempDir* CrashSafety::dir_ = nullptr;
double CrashSafety::reference_seconds_ = 0.0;

TEST_F(CrashSafety, SigkillAtRandomMomentsThenResumeGivesIdenticalWeights) {
  const std::string out = dir_->file("killed"), log = dir_->file("killed.log");
  const int64_t total_steps = checkpoint::load_checkpoint(dir_->file("reference/last.safetensors")).info.step;
  std::mt19937 rng(2026);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // Kill at a random moment within the expected remaining time; resume; repeat. A run that
  // finishes before its kill is checked like any other, and a new run starts, until 12 kills.
  int kills = 0, finished = 0;
  for (int runs = 0; kills < 12; ++runs) {
    ASSERT_LT(runs, 80) << "kills kept missing";
    int64_t done_steps = 0;
    if (fs::exists(out + "/last.safetensors"))
      done_steps = checkpoint::load_checkpoint(out + "/last.safetensors").info.step;
    const std::vector<std::string> args = done_steps > 0 || fs::exists(out + "/last.safetensors")
                                              ? std::vector<std::string>{"train", "--resume", out, "--threads", "1"}
                                              : train_args(dir_->file("data"), out);
    const double remaining = static_cast<double>(total_steps - done_steps) / static_cast<double>(total_steps);
    const pid_t pid = spawn(args, log);
    std::this_thread::sleep_for(std::chrono::duration<double>(uniform(rng) * remaining * reference_seconds_));
    ::kill(pid, SIGKILL);
    const int code = wait_for(pid);
    if (code == 128 + SIGKILL) {
      ++kills;
      // Whatever moment the kill hit, every checkpoint on disk is complete and readable.
      for (const char* name : {"/last.safetensors", "/best.safetensors"}) {
        if (fs::exists(out + name)) {
          EXPECT_NO_THROW(checkpoint::load_checkpoint(out + name)) << "after kill " << kills << ": " << name;
        }
      }
      continue;
    }
    ASSERT_EQ(code, 0) << read_text(log);
    ++finished;
    expect_same_tensors(out + "/last.safetensors", dir_->file("reference/last.safetensors"));
    EXPECT_EQ(epoch_numbers(out + "/metrics.jsonl"), epoch_numbers(dir_->file("reference/metrics.jsonl")));
    EXPECT_EQ(temporaries(out), std::vector<std::string>{}) << "a killed save's temporary file outlived the next run";
    fs::remove_all(out);
  }
  // Finish the last killed run and check it too.
  if (fs::exists(out)) {
    const std::vector<std::string> args = fs::exists(out + "/last.safetensors")
                                              ? std::vector<std::string>{"train", "--resume", out, "--threads", "1"}
                                              : train_args(dir_->file("data"), out);
    ASSERT_EQ(wait_for(spawn(args, log)), 0) << read_text(log);
    ++finished;
    expect_same_tensors(out + "/last.safetensors", dir_->file("reference/last.safetensors"));
    EXPECT_EQ(epoch_numbers(out + "/metrics.jsonl"), epoch_numbers(dir_->file("reference/metrics.jsonl")));
    EXPECT_EQ(temporaries(out), std::vector<std::string>{});
  }
  EXPECT_GE(finished, 1);
  std::printf("%d kills, %d completed runs compared with the reference\n", kills, finished);
}

TEST_F(CrashSafety, CtrlCSavesACheckpointAndExitsCleanly) {
  const std::string out = dir_->file("interrupted"), log = dir_->file("interrupted.log");
  const pid_t pid = spawn(train_args(dir_->file("data"), out), log);
  // Wait for training to be under way (a checkpoint written), then interrupt.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!fs::exists(out + "/last.safetensors") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGINT);
  const int code = wait_for(pid);
  const std::string text = read_text(log);
  ASSERT_EQ(code, 130) << "(0 would mean training finished before the interrupt arrived)\n" << text;
  EXPECT_NE(text.find("interrupted by Ctrl-C (SIGINT) at step "), std::string::npos) << text;
  EXPECT_NE(text.find("saved " + out + "/last.safetensors; continue with: vit train --resume " + out),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("error:"), std::string::npos) << text;
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(out + "/last.safetensors");
  EXPECT_GT(saved.info.step, 0);
  EXPECT_EQ(temporaries(out), std::vector<std::string>{});
  // Resuming finishes the run with the weights of the uninterrupted one.
  ASSERT_EQ(wait_for(spawn({"train", "--resume", out, "--threads", "1"}, log)), 0) << read_text(log);
  expect_same_tensors(out + "/last.safetensors", dir_->file("reference/last.safetensors"));
  EXPECT_EQ(epoch_numbers(out + "/metrics.jsonl"), epoch_numbers(dir_->file("reference/metrics.jsonl")));
}

// SIGTERM (what `kill`, systemd and container runtimes send) saves the same way and exits with
// the shell's convention for it, 128 + 15.
TEST_F(CrashSafety, SigtermSavesAndExitsWith143) {
  const std::string out = dir_->file("terminated"), log = dir_->file("terminated.log");
  const pid_t pid = spawn(train_args(dir_->file("data"), out), log);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!fs::exists(out + "/last.safetensors") && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGTERM);
  const int code = wait_for(pid);
  const std::string text = read_text(log);
  ASSERT_EQ(code, 143) << "(0 would mean training finished before the signal arrived)\n" << text;
  EXPECT_NE(text.find("interrupted by SIGTERM at step "), std::string::npos) << text;
  EXPECT_GT(checkpoint::load_checkpoint(out + "/last.safetensors").info.step, 0);
}

TEST_F(CrashSafety, FullDiskDuringASaveKeepsThePreviousCheckpoint) {
  const std::string out = dir_->file("full"), log = dir_->file("full.log");
  fs::copy(dir_->file("reference"), out);
  const std::vector<uint8_t> before = testing::read_bytes(out + "/last.safetensors");
  // Writes past 8 KiB fail (EFBIG) as they would on a full disk; the checkpoint is larger.
  ASSERT_GT(before.size(), 8192u);
  const pid_t pid = spawn({"train", "--resume", out, "--epochs", "8", "--threads", "1"}, log, 8192);
  const int code = wait_for(pid);
  const std::string text = read_text(log);
  EXPECT_EQ(code, 1) << text;
  // The error names the checkpoint, never the temporary file it was writing
  // (last.safetensors.tmp.<pid>.<n>, this process's own).
  EXPECT_NE(text.find("error: [train] could not save a checkpoint: [safetensors] " + out +
                      "/last.safetensors: write failed (File too large). Stopping; the previous " + out +
                      "/last.safetensors is unchanged"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(".tmp." + std::to_string(pid) + "."), std::string::npos) << text;
  EXPECT_EQ(testing::read_bytes(out + "/last.safetensors"), before);
  EXPECT_EQ(temporaries(out), std::vector<std::string>{});
  EXPECT_NO_THROW(checkpoint::load_checkpoint(out + "/last.safetensors"));
}

}  // namespace
}  // namespace vit
