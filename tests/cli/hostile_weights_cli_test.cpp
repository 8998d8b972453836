// Issue 29's "two weight sets, one answer" and "class names are the truth" as a user meets them:
// a run with EMA evaluates its EMA weights, and `vit eval`, `vit info` and `vit predict` default
// to those, eval and info saying so (--raw / --ema choose; predict notes the other set); a folder whose class names are
// not UTF-8 trains and then evaluates with the same names.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "data/image.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::TempDir;
using testing::vit;

const std::string kModel =
    " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 --pool mean --batch-size 32 --threads 1 --plain";

// The first "<prefix> <number>%" in the output.
std::string percent_after(const std::string& out, const std::string& prefix) {
  std::smatch m;
  const std::regex pattern(prefix + " ([0-9.]+)%");
  return std::regex_search(out, m, pattern) ? m[1].str() : "(none in: " + out + ")";
}

TEST(HostileWeightsCli, EvalInfoAndPredictUseTheWeightsTheRunEvaluatedAndSaySo) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 96, 32);
  const std::string data = " --data " + dir.file("data");
  CommandResult r = vit("train" + data + kModel + " --epochs 1 --ema 0.5 --out " + dir.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string trained = percent_after(r.out, "test loss [0-9.]+ acc");
  EXPECT_NE(r.out.find("best.safetensors: epoch 1, " + trained + "%, EMA weights as evaluated"), std::string::npos)
      << r.out;
  const std::string best = dir.file("run/best.safetensors");

  r = vit("eval --checkpoint " + best + data);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("EMA weights, as the run evaluated (--raw: the raw weights)"), std::string::npos) << r.out;
  EXPECT_EQ(percent_after(r.out, "top-1"), trained) << r.out;  // one checkpoint, one accuracy
  r = vit("eval --checkpoint " + best + data + " --raw");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("raw weights (--raw); the run evaluated its EMA weights"), std::string::npos) << r.out;
  r = vit("eval --checkpoint " + best + data + " --json --ema");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"weights\":\"ema\""), std::string::npos) << r.out;
  r = vit("eval --checkpoint " + best + data + " --ema --raw");
  EXPECT_NE(r.exit_code, 0) << r.out;

  r = vit("info --checkpoint " + best);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("EMA weights, as the run evaluated"), std::string::npos) << r.out;

  data::Image digit{1, 28, 28, std::vector<uint8_t>(784, 0)};
  for (int x = 3; x < 25; ++x) digit.pixels[9 * 28 + x] = 255;
  data::write_png(dir.file("d.png"), digit);
  // predict: the other set, asked for, is said (its accuracy is not the one training printed).
  r = vit("predict --checkpoint " + best + " --raw " + dir.file("d.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("note: " + best + ": raw weights (--raw)"), std::string::npos) << r.out;
}

TEST(HostileWeightsCli, EvalTakesTheNonUtf8ClassNamesTheModelWasTrainedOn) {
  TempDir dir;
  for (const char* split : {"train", "test"}) {
    int k = 0;
    for (const std::string name : {"caf\xE9", "th\xE9"}) {
      fs::create_directories(dir.file("data/") + split + "/" + name);
      for (int i = 0; i < 4; ++i) {
        data::write_png(dir.file("data/") + split + "/" + name + "/" + std::to_string(i) + ".png",
                        data::Image{1, 28, 28, std::vector<uint8_t>(784, static_cast<uint8_t>(40 + 120 * k + i))});
      }
      ++k;
    }
  }
  CommandResult r = vit("train --data " + dir.file("data") + kModel + " --epochs 1 --out " + dir.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = vit("eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("data"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("caf\\xE9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(test split, 8 images)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vit
