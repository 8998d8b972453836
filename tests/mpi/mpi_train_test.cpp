// `mpirun -np 2 vit train` end to end, on loopback, as a user would type it: two ranks train the
// same model as one process (weights after 20 steps with dropout, drop-path and augmentation;
// accuracy after 2 epochs of the digits), reruns are bit-identical, a SIGKILLed rank stops the
// job in bounded time with a message naming it and a checkpoint that loads and resumes (with 2
// ranks and with 1), and ranks started with different flags or data are refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kDigits = std::string(VIT_SOURCE_DIR) + "/data/mnist";
// As root (CI containers) OpenMPI needs both variables; --oversubscribe: 2 ranks on any machine.
const std::string kMpiEnv =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1";

// `mpirun <rest>` through the shell; stdout and stderr together.
CommandResult mpirun_command(const std::string& rest) {
  return run_shell(kMpiEnv + " " + MPIRUN + " " + rest + " 2>&1");
}

// `mpirun -np 2 vit <args>`.
CommandResult mpirun(const std::string& args) {
  return mpirun_command("-np 2 " + std::string(VIT_BINARY) + " " + args);
}

void require_digits() {
  ASSERT_TRUE(fs::exists(kDigits + "/train-images-idx3-ubyte"))
      << kDigits << " is missing: scripts/setup.sh fetches the bundled digits";
}

// The model's float weights (EMA and optimiser state left out), by name.
std::vector<std::pair<std::string, Tensor>> weights(const std::string& path) {
  return checkpoint::load_checkpoint(path).weights;
}

// Equivalence of two weight sets: the whole model's relative difference ||a - b|| / ||a||, and
// the largest difference of any weight relative to its tensor's largest magnitude (at least 1).
struct Difference {
  double global = 0.0, worst = 0.0;
  std::string worst_name;
};
Difference difference(const std::string& a_path, const std::string& b_path) {
  const auto a = weights(a_path), b = weights(b_path);
  EXPECT_EQ(a.size(), b.size());
  Difference d;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const std::vector<double> x = a[i].second.to_vector(), y = b[i].second.to_vector();
    EXPECT_EQ(x.size(), y.size());
    double scale = 1.0, diff = 0.0;
    for (size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
      num += (x[k] - y[k]) * (x[k] - y[k]);
      den += x[k] * x[k];
      scale = std::max(scale, std::abs(x[k]));
      diff = std::max(diff, std::abs(x[k] - y[k]));
    }
    if (diff / scale > d.worst) d.worst = diff / scale, d.worst_name = a[i].first;
  }
  d.global = std::sqrt(num / std::max(den, 1e-300));
  return d;
}

// Every tensor of two checkpoints (weights, optimiser state, EMA) equal bit for bit (the files
// themselves differ: they record the training time).
void expect_same_tensors(const std::string& a_path, const std::string& b_path) {
  const checkpoint::LoadedCheckpoint a = checkpoint::load_checkpoint(a_path), b = checkpoint::load_checkpoint(b_path);
  for (const auto& [x, y] : {std::pair{&a.weights, &b.weights}, std::pair{&a.optimizer, &b.optimizer}}) {
    ASSERT_EQ(x->size(), y->size());
    ASSERT_FALSE(x->empty());
    for (size_t i = 0; i < x->size(); ++i) {
      EXPECT_EQ((*x)[i].first, (*y)[i].first);
      EXPECT_EQ((*x)[i].second.to_vector(), (*y)[i].second.to_vector()) << (*x)[i].first;
    }
  }
  EXPECT_EQ(a.info.step, b.info.step);
}

double final_accuracy(const std::string& out) {
  const auto at = out.find("done: test accuracy ");
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 20));
}

// 20 steps with dropout, attention dropout, drop-path and the digits' augmentation plus mixup:
// 2 ranks x 1 thread train the model 1 process x 1 thread does, and a rerun is bit-identical.
TEST(Mpi, TwoRanksTrainTheSameModelAsOneProcess) {
  require_digits();
  TempDir dir;
  const std::string common = "train --preset vit_digits --data " + kDigits +
                             " --steps 20 --threads 1 --dropout 0.1 --attn-dropout 0.1 --drop-path 0.1 "
                             "--mixup 0.2 --plain --out ";
  const CommandResult one = vit(common + dir.file("one"));
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const CommandResult two = mpirun(common + dir.file("two"));
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_NE(two.out.find("2 ranks x 1 threads"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("of the communication hidden"), std::string::npos) << two.out;
  // Rank 0 alone prints: one summary line.
  size_t summaries = 0;
  for (size_t at = two.out.find("done: "); at != std::string::npos; at = two.out.find("done: ", at + 1)) ++summaries;
  EXPECT_EQ(summaries, 1u) << two.out;

  const Difference d = difference(dir.file("one/last.safetensors"), dir.file("two/last.safetensors"));
  EXPECT_LT(d.global, 1e-5) << "whole-model relative difference";
  EXPECT_LT(d.worst, 1e-5) << "worst weight, relative to its tensor's scale: " << d.worst_name;
  EXPECT_GT(d.global, 0.0) << "identical bytes would mean the two runs did not differ in summation order at all";

  const CommandResult again = mpirun(common + dir.file("again"));
  ASSERT_EQ(again.exit_code, 0) << again.out;
  // A rerun with the same number of ranks is bit-identical.
  expect_same_tensors(dir.file("two/last.safetensors"), dir.file("again/last.safetensors"));
}

// Two epochs of the digits: the test accuracies of 1 process and 2 ranks within 0.3 points. The
// recipe learns fast enough (no augmentation, batch 32, the hybrid vit_fashion model) that two
// epochs end on the flat part of the curve (~87%), where summation-order noise cannot move the
// accuracy by chance.
TEST(Mpi, TwoEpochsOfDigitsReachTheSameAccuracy) {
  require_digits();
  TempDir dir;
  const std::string common = "train --preset vit_fashion --data " + kDigits +
                             " --epochs 2 --batch-size 32 --warmup-epochs 0.25 --no-augment --threads 1 --plain --out ";
  const CommandResult one = vit(common + dir.file("one"));
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const CommandResult two = mpirun(common + dir.file("two"));
  ASSERT_EQ(two.exit_code, 0) << two.out;
  const double a = final_accuracy(one.out), b = final_accuracy(two.out);
  EXPECT_GT(a, 80.0) << one.out;
  EXPECT_NEAR(a, b, 0.3) << one.out << two.out;
}

// `mpirun -np 2 vit <args>` in the background (its pid is mpirun's), output into log.
pid_t spawn_job(const std::string& args, const std::string& log) {
  const pid_t job = fork();
  if (job == 0) {
    const std::string command =
        "exec env " + kMpiEnv + " " + MPIRUN + " -np 2 " + VIT_BINARY + " " + args + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return job;
}

bool wait_for_file(const std::string& path) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!fs::exists(path) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return fs::exists(path);
}

// Sends `sig` to `target`, then waits for the job: its exit code, the seconds it took to end
// after the signal, and its log.
struct Ended {
  int code;
  double seconds;
  std::string out;
};
Ended signal_and_wait(pid_t target, int sig, pid_t job, const std::string& log) {
  const auto from = Clock::now();
  if (kill(target, sig) != 0) ADD_FAILURE() << "kill(" << target << ", " << sig << ") failed";
  const int code = wait_for(job);
  return {code, std::chrono::duration<double>(Clock::now() - from).count(), read_text(log)};
}

// The ranks' pids: mpirun's children running vit.
std::vector<pid_t> ranks_of(pid_t mpirun_pid) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(vit)") == std::string::npos) continue;
    char state = 0;
    int parent = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &parent) == 2 && parent == mpirun_pid)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

// SIGKILL one rank mid-epoch: the job ends non-zero within 30 s, naming the lost rank and the last
// good checkpoint; that checkpoint loads, and --resume finishes the run with 2 ranks and with 1.
TEST(Mpi, AKilledRankStopsTheJobAndTheRunResumes) {
  require_digits();
  TempDir dir;
  const std::string run = dir.file("run"), log = dir.file("log");
  const std::string args = "train --preset vit_digits --data " + kDigits +
                           " --epochs 2 --threads 1 --checkpoint-every 20 --plain --out " + run;
  const pid_t job = spawn_job(args, log);
  // Wait for the first mid-epoch checkpoint (step 20 of 125), then kill rank 1.
  ASSERT_TRUE(wait_for_file(run + "/last.safetensors")) << read_text(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<pid_t> ranks = ranks_of(job);
  ASSERT_EQ(ranks.size(), 2u) << read_text(log);
  std::sort(ranks.begin(), ranks.end());
  const pid_t victim = ranks[1];
  const auto [code, seconds, out] = signal_and_wait(victim, SIGKILL, job, log);
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(seconds, 30.0) << out;
  EXPECT_NE(out.find("pid " + std::to_string(victim)), std::string::npos) << "the lost rank is named\n" << out;
  EXPECT_NE(out.find("is gone"), std::string::npos) << out;
  EXPECT_NE(out.find("The last good checkpoint is " + run + "/last.safetensors"), std::string::npos) << out;
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(run + "/last.safetensors");
  EXPECT_GE(saved.info.step, 20);
  EXPECT_LT(saved.info.step, 250) << "killed mid-run";

  fs::copy(run, dir.file("copy"), fs::copy_options::recursive);
  const CommandResult two = mpirun("train --resume " + run + " --plain");
  EXPECT_EQ(two.exit_code, 0) << two.out;
  EXPECT_NE(two.out.find("resumed from"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("done: test accuracy"), std::string::npos) << two.out;
  const CommandResult one = vit("train --resume " + dir.file("copy") + " --threads 1 --plain");
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_NE(one.out.find("done: test accuracy"), std::string::npos) << one.out;
  EXPECT_EQ(checkpoint::load_checkpoint(run + "/last.safetensors").info.step, 250);
  EXPECT_EQ(checkpoint::load_checkpoint(dir.file("copy") + "/last.safetensors").info.step, 250);
}

// Ctrl-C to mpirun: it sends SIGTERM to every rank; they agree to stop after the same step, rank 0
// saves a mid-epoch checkpoint and says so once, the ranks exit 143 (mpirun itself reports 1,
// OpenMPI's status for a job it was told to stop), and --resume finishes the run.
TEST(Mpi, CtrlCToMpirunSavesAndTheRunResumes) {
  require_digits();
  TempDir dir;
  const std::string run = dir.file("run"), log = dir.file("log");
  // Batches of 16: 500 steps an epoch, so the ~1 s mpirun may take to pass the signal on still
  // lands mid-epoch on a fast machine (with 125 steps of 64 the epoch's end came first).
  const pid_t job = spawn_job("train --preset vit_digits --data " + kDigits +
                                  " --epochs 2 --batch-size 16 --threads 1 --checkpoint-every 30 --plain --out " + run,
                              log);
  // Signalled as soon as the step-30 checkpoint is there: mid-epoch (else the epoch's evaluation
  // takes the stop at step 500).
  ASSERT_TRUE(wait_for_file(run + "/last.safetensors")) << read_text(log);
  const auto [code, seconds, out] = signal_and_wait(job, SIGINT, job, log);
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(seconds, 10.0) << out;
  const auto at = out.find("interrupted by SIGTERM at step ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find("interrupted by", at + 1), std::string::npos) << "rank 0 alone says it\n" << out;
  const int64_t step = std::stoll(out.substr(at + 31));
  const checkpoint::LoadedCheckpoint saved = checkpoint::load_checkpoint(run + "/last.safetensors");
  EXPECT_EQ(saved.info.step, step) << "the checkpoint is the stop's, not an older one";
  EXPECT_NE(step % 500, 0) << "saved mid-epoch";
  const CommandResult resumed = mpirun("train --resume " + run + " --plain");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_EQ(checkpoint::load_checkpoint(run + "/last.safetensors").info.step, 1000);
}

// Ranks given different flags, or different data, are refused before anything is trained or
// written, each naming what differs.
TEST(Mpi, RanksWithDifferentFlagsOrDataAreRefused) {
  require_digits();
  TempDir dir;
  write_toy_mnist(dir.file("toy"), 64, 16);
  const std::string common = " --preset vit_digits --threads 1 --plain --out " + dir.file("run");
  const CommandResult epochs =
      mpirun_command("-np 1 " + std::string(VIT_BINARY) + " train --data " + kDigits + " --epochs 3" + common +
                     " : -np 1 " + VIT_BINARY + " train --data " + kDigits + " --epochs 2" + common);
  EXPECT_NE(epochs.exit_code, 0) << epochs.out;
  EXPECT_NE(epochs.out.find("epochs: 2 here, 3 on rank 0"), std::string::npos) << epochs.out;
  EXPECT_FALSE(fs::exists(dir.file("run/last.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file("run/metrics.jsonl"))) << "nothing written for a refused job";

  const CommandResult data =
      mpirun_command("-np 1 " + std::string(VIT_BINARY) + " train --data " + kDigits + " --epochs 1" + common +
                     " : -np 1 " + VIT_BINARY + " train --data " + dir.file("toy") + " --epochs 1" + common);
  EXPECT_NE(data.exit_code, 0) << data.out;
  EXPECT_NE(data.out.find("rank 1 (pid"), std::string::npos) << data.out;
  EXPECT_NE(data.out.find("data: "), std::string::npos) << data.out;
  EXPECT_NE(data.out.find("differ from rank 0's"), std::string::npos) << data.out;
}

// `vit shard` then `mpirun -np 2 vit train` over the shards: each rank reads its own shards (the
// two lists are disjoint and cover the set), and the job trains every image of an epoch (the data
// layer's test counts the images each rank's rows hold: tests/data/shards_test.cpp).
TEST(Mpi, TwoRanksReadDisjointShards) {
  TempDir dir;
  write_photo_folder(dir.file("photos"), 2, 24, 4, 12, 12);
  const CommandResult made = vit("shard " + dir.file("photos") + " " + dir.file("shards") + " --shard-size 6");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  EXPECT_NE(made.out.find("train: 48 samples in " + dir.file("shards/train-{000000..000007}.tar (8 shards)")),
            std::string::npos)
      << made.out;
  const CommandResult r = mpirun("train --data " + dir.file("shards") +
                                 " --preset vit_digits --image-size 12 --patch-size 4 --epochs 2 --batch-size 8 "
                                 "--threads 1 --plain --out " +
                                 dir.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("48 training / 8 test images"), std::string::npos) << r.out;
  std::set<std::string> seen;
  size_t lines = 0;
  for (const int rank : {0, 1}) {
    const std::string head = "shards: rank " + std::to_string(rank) + " of 2 reads ";
    const size_t at = r.out.find(head);
    ASSERT_NE(at, std::string::npos) << r.out;
    const size_t colon = r.out.find(": ", at + head.size()), end = r.out.find('\n', at);
    std::istringstream names(r.out.substr(colon + 2, end - colon - 2));
    for (std::string name; names >> name; ++lines) {
      EXPECT_TRUE(seen.insert(name).second) << name << " read by both ranks\n" << r.out;
    }
  }
  EXPECT_EQ(seen.size(), 8u) << r.out;
  EXPECT_EQ(lines, 8u);
  EXPECT_TRUE(fs::exists(dir.file("run/last.safetensors")));
}

// Commands that do not run as one job are refused under mpirun, once (not once per rank), before
// doing anything.
TEST(Mpi, OtherCommandsAreRefusedUnderMpirun) {
  const CommandResult r = mpirun("eval --checkpoint nowhere.safetensors");
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto at = r.out.find("error: `vit eval` does not run as an MPI job of 2 ranks");
  EXPECT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("error:", at + 1), std::string::npos) << "said once\n" << r.out;
  EXPECT_EQ(r.out.find("nowhere"), std::string::npos) << "refused before reading anything\n" << r.out;
  const CommandResult bench = mpirun("bench --allreduce --iters 2");
  EXPECT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_NE(bench.out.find("allreduce (float32 sum) over 2 ranks"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("bus bandwidth"), std::string::npos) << bench.out;
}

// A hostfile naming a host that does not answer: mpirun's ssh gives up after the connect timeout
// the README documents (OMPI_MCA_plm_rsh_args="-o ConnectTimeout=5 -o BatchMode=yes") and mpirun
// exits non-zero with its own message, instead of hanging for the kernel's TCP timeout (~2 min).
TEST(Mpi, AnUnreachableHostFailsWithinTheConnectTimeout) {
  TempDir dir;
  const std::string host = "10.255.255.1 slots=1\n";  // a private address nothing answers on
  write_bytes(dir.file("hosts"), std::vector<uint8_t>(host.begin(), host.end()));
  const auto from = Clock::now();
  const CommandResult r = mpirun_command("--mca plm_rsh_args \"-o ConnectTimeout=5 -o BatchMode=yes\" --hostfile " +
                                         dir.file("hosts") + " -np 1 " + VIT_BINARY + " train --steps 1");
  const double seconds = std::chrono::duration<double>(Clock::now() - from).count();
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_LT(seconds, 30.0) << r.out;
  EXPECT_TRUE(r.out.find("ORTE was unable to reliably start") != std::string::npos ||
              r.out.find("10.255.255.1") != std::string::npos)
      << "mpirun names the failed start\n"
      << r.out;
  EXPECT_EQ(r.out.find("model "), std::string::npos) << "nothing trained\n" << r.out;
}

}  // namespace
}  // namespace vit::testing
