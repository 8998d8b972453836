// `vit train` and its run folder against a careless or hostile user, end to end: a finished run
// is never replaced without --overwrite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "run_vit.h"
#include "support/files.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

const std::string kTiny = " --patch-size 7 --dim 16 --depth 1 --heads 2 --batch-size 32 --threads 1";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
  expect_error(vit("train --data " + dir.file("missing") + " --out " + run + kTiny), "[train] " + run + " already holds");
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

}  // namespace
}  // namespace vit
