// The `vit` command end to end, as a user types it: train / eval / predict / info on small
// generated data, and every bad input ending in one "error: ..." line and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/image.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::TempDir;

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    testing::write_toy_mnist(dir_->file("data"), 192, 64);
    const CommandResult r = vit("train --data " + dir_->file("data") + " --out " + dir_->file("run") +
                                " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 --pool mean --epochs 2 "
                                "--batch-size 32 --threads 1 --ema 0.99");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    train_output_ = r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
  static std::string train_output_;
};
TempDir* Cli::dir_ = nullptr;
std::string Cli::train_output_;

TEST(CliVersion, VersionIsTheProjects) {
  const CommandResult r = vit("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("vit ") + VIT_VERSION + "\n");
}

TEST_F(Cli, TrainPrintsPlainEpochLinesWhenNotATerminal) {
  EXPECT_NE(train_output_.find("epoch 1/2  train loss"), std::string::npos) << train_output_;
  EXPECT_NE(train_output_.find("epoch 2/2"), std::string::npos);
  EXPECT_NE(train_output_.find("img/s"), std::string::npos);
  EXPECT_EQ(train_output_.find('\r'), std::string::npos) << "no progress bar redraws in a pipe";
  EXPECT_TRUE(std::filesystem::exists(dir_->file("run/metrics.jsonl")));
  EXPECT_TRUE(std::filesystem::exists(dir_->file("run/report.html")));
}

TEST_F(Cli, EvalJsonAndText) {
  const CommandResult r =
      vit("eval --checkpoint " + dir_->file("run/last.safetensors") + " --data " + dir_->file("data") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 64);
  EXPECT_GE(j["top5"].get<double>(), j["top1"].get<double>());
  EXPECT_EQ(j["per_class_accuracy"].size(), 10u);
  EXPECT_EQ(j["confusion"].size(), 10u);
  const CommandResult text =
      vit("eval --checkpoint " + dir_->file("run/last.safetensors") + " --data " + dir_->file("data"));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("top-1"), std::string::npos);
  EXPECT_NE(text.out.find("confusion matrix"), std::string::npos);
}

TEST_F(Cli, PredictPngTopK) {
  data::Image image{3, 40, 40, std::vector<uint8_t>(3 * 40 * 40, 30)};
  for (int64_t x = 0; x < 40; ++x) {
    for (int64_t c = 0; c < 3; ++c) image.pixels[(c * 40 + 12) * 40 + x] = 220;
  }
  data::write_png(dir_->file("digit.png"), image);
  const CommandResult r =
      vit("predict --checkpoint " + dir_->file("run/last.safetensors") + " --top-k 3 " + dir_->file("digit.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(dir_->file("digit.png")), std::string::npos);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '%'), 3) << r.out;
}

TEST_F(Cli, InfoCountsParametersExactly) {
  const CommandResult r = vit("info --preset vit_base_patch16_224");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("86567656"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("17.564 GMACs"), std::string::npos) << r.out;
  EXPECT_NE(vit("info --checkpoint " + dir_->file("run/last.safetensors")).out.find("total"), std::string::npos);
}

TEST_F(Cli, PredictTensorWritesLogitsNpyAndAttentionDrawsAPng) {
  const std::string layouts = std::string(VIT_GOLDEN_DIR) + "/layouts/";
  // A (2, 3, 32, 32) float32 .npy input for the tiny timm fixture (48 wide, 4 heads).
  std::vector<uint8_t> npy = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 32, 32), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  npy.push_back(static_cast<uint8_t>(header.size() & 0xff));
  npy.push_back(static_cast<uint8_t>(header.size() >> 8));
  npy.insert(npy.end(), header.begin(), header.end());
  for (int i = 0; i < 2 * 3 * 32 * 32; ++i) {
    const float v = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
    const auto* bytes = reinterpret_cast<const uint8_t*>(&v);
    npy.insert(npy.end(), bytes, bytes + 4);
  }
  testing::write_bytes(dir_->file("x.npy"), npy);
  const CommandResult r = vit("predict --checkpoint " + layouts + "timm.safetensors --heads 4 --tensor " +
                              dir_->file("x.npy") + " --out " + dir_->file("logits.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("logits (2, 10) (timm layout)"), std::string::npos) << r.out;
  EXPECT_EQ(testing::read_bytes(dir_->file("logits.npy")).size(), 128u + 2 * 10 * 4);
  expect_error(
      vit("predict --checkpoint " + layouts + "timm.safetensors --heads 4 --tensor " + dir_->file("logits.npy")),
      "[predict] " + dir_->file("logits.npy") + ": input (2, 10) but the model takes (B, 3, 32, 32)");
  // vit attention on a digit with the trained checkpoint.
  data::Image digit{1, 28, 28, std::vector<uint8_t>(784, 0)};
  for (int y = 5; y < 23; ++y) digit.pixels[y * 28 + 14] = 255;
  data::write_png(dir_->file("one.png"), digit);
  const CommandResult a = vit("attention --checkpoint " + dir_->file("run/last.safetensors") + " " +
                              dir_->file("one.png") + " --out " + dir_->file("map.png") + " --size 64");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  const data::Image map = data::read_image(dir_->file("map.png"));
  EXPECT_EQ(map.height, 64);
  EXPECT_EQ(map.width, 3 * 64 + 16);
}

TEST_F(Cli, BenchReportsLatencyThroughputAndMemory) {
  const CommandResult r = vit("bench --preset vit_digits --batch 4 --iters 3 --warmup 1 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch"], 4);
  EXPECT_GT(j["images_per_s"].get<double>(), 0.0);
  EXPECT_GE(j["p90_ms"].get<double>(), j["median_ms"].get<double>());
  EXPECT_GT(j["peak_rss_mb"].get<double>(), 1.0);
  EXPECT_EQ(vit("bench --preset vit_digits --train --batch 8 --iters 2 --warmup 0").exit_code, 0);
  // A trained checkpoint, loaded (timed) instead of a preset; the autograd path for comparison.
  const CommandResult loaded =
      vit("bench --checkpoint " + dir_->file("run/last.safetensors") + " --batch 2 --iters 2 --json");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.out;
  const auto l = nlohmann::json::parse(loaded.out);
  EXPECT_EQ(l["model"], dir_->file("run/last.safetensors"));
  EXPECT_GE(l["load_ms"].get<double>(), 0.0);
  const CommandResult graph = vit("bench --preset vit_digits --graph --batch 2 --iters 2 --json");
  ASSERT_EQ(graph.exit_code, 0) << graph.out;
  EXPECT_EQ(nlohmann::json::parse(graph.out)["mode"], "inference-graph");
  expect_error(vit("bench --checkpoint " + dir_->file("missing.safetensors")),
               "[file] " + dir_->file("missing.safetensors") + ": cannot open (No such file or directory)");
  expect_error(vit("bench --preset nope"), "[vit_config] unknown preset 'nope'");
}

// vit quantize, then every inference command on the int8 file, as a user types them.
TEST_F(Cli, QuantizeThenPredictEvalBenchInfoAttention) {
  const std::string f32 = dir_->file("run/last.safetensors"), q8 = dir_->file("int8.safetensors");
  const CommandResult q = vit("quantize --checkpoint " + f32 + " --out " + q8);
  ASSERT_EQ(q.exit_code, 0) << q.out;
  EXPECT_NE(q.out.find("5 Linear weights to int8"), std::string::npos) << q.out;  // qkv, proj, fc1, fc2, head
  EXPECT_NE(q.out.find("8-bit"), std::string::npos) << q.out;                     // the default scheme
  const CommandResult e32 = vit("eval --checkpoint " + f32 + " --data " + dir_->file("data") + " --json");
  const CommandResult e8 = vit("eval --checkpoint " + q8 + " --data " + dir_->file("data") + " --json");
  ASSERT_EQ(e8.exit_code, 0) << e8.out;
  const auto j32 = nlohmann::json::parse(e32.out), j8 = nlohmann::json::parse(e8.out);
  EXPECT_NEAR(j8["top1"].get<double>(), j32["top1"].get<double>(), 0.1) << e8.out;  // within 10 points here
  EXPECT_NEAR(j8["loss"].get<double>(), j32["loss"].get<double>(), 0.1 * j32["loss"].get<double>());
  data::Image digit{1, 28, 28, std::vector<uint8_t>(28 * 28, 0)};
  for (int64_t y = 6; y < 22; ++y) digit.pixels[static_cast<size_t>(y * 28 + 14)] = 255;
  data::write_png(dir_->file("q_digit.png"), digit);
  const CommandResult p = vit("predict --checkpoint " + q8 + " --top-k 2 " + dir_->file("q_digit.png"));
  EXPECT_EQ(p.exit_code, 0) << p.out;
  const CommandResult b = vit("bench --checkpoint " + q8 + " --batch 2 --iters 2 --json");
  EXPECT_EQ(b.exit_code, 0) << b.out;
  EXPECT_EQ(nlohmann::json::parse(b.out)["precision"], "int8") << b.out;
  const CommandResult i = vit("info --checkpoint " + q8);
  EXPECT_NE(i.out.find("int8 model"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("8-bit, scheme vit-int8-2"), std::string::npos) << i.out;
  // --bits 7: the older scheme, which runs too; other counts are refused.
  const std::string q7 = dir_->file("int8_7.safetensors");
  const CommandResult q7r = vit("quantize --checkpoint " + f32 + " --out " + q7 + " --bits 7");
  ASSERT_EQ(q7r.exit_code, 0) << q7r.out;
  EXPECT_NE(q7r.out.find("7-bit"), std::string::npos) << q7r.out;
  EXPECT_NE(vit("info --checkpoint " + q7).out.find("7-bit, scheme vit-int8-1"), std::string::npos);
  EXPECT_EQ(vit("predict --checkpoint " + q7 + " " + dir_->file("q_digit.png")).exit_code, 0);
  EXPECT_NE(vit("quantize --checkpoint " + f32 + " --out " + dir_->file("q6.safetensors") + " --bits 6").exit_code, 0);
  const CommandResult a =
      vit("attention --checkpoint " + q8 + " " + dir_->file("q_digit.png") + " --out " + dir_->file("q_map.png"));
  EXPECT_EQ(a.exit_code, 0) << a.out;
  // Refused: quantizing again, writing over the input or an existing file, a missing input.
  expect_error(vit("quantize --checkpoint " + q8 + " --out " + dir_->file("twice.safetensors")),
               "[quantize] " + q8 + ": already an int8 model");
  expect_error(vit("quantize --checkpoint " + f32 + " --out " + f32),
               "[quantize] --out " + f32 + " is the input checkpoint itself");
  expect_error(vit("quantize --checkpoint " + f32 + " --out " + q8), "[quantize] --out " + q8 + " exists");
  EXPECT_EQ(vit("quantize --checkpoint " + f32 + " --out " + q8 + " --overwrite").exit_code, 0);
  expect_error(vit("quantize --checkpoint " + f32 + " --out ''"), "[quantize] --out is empty");
  expect_error(vit("quantize --checkpoint " + f32 + " --out " + dir_->path() + " --overwrite"),
               "[quantize] --out " + dir_->path() + " is a directory");
  expect_error(vit("quantize --checkpoint " + dir_->file("missing.safetensors") + " --out " + dir_->file("x")),
               "[file] " + dir_->file("missing.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("x")));
  // Training on from an int8 file is refused (it is for inference).
  std::filesystem::create_directories(dir_->file("q_run"));
  std::filesystem::copy_file(q8, dir_->file("q_run/last.safetensors"));
  const CommandResult r = vit("train --resume " + dir_->file("q_run") + " --epochs 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("int8 model"), std::string::npos) << r.out;
}

TEST_F(Cli, ResumeContinuesToMoreEpochs) {
  std::filesystem::copy(dir_->file("run"), dir_->file("run2"));
  const CommandResult r = vit("train --resume " + dir_->file("run2") + " --epochs 3 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos);
  EXPECT_NE(r.out.find("epoch 3/3"), std::string::npos);
  EXPECT_EQ(r.out.find("epoch 1/3"), std::string::npos) << "finished epochs are not re-run";
}

TEST_F(Cli, BadInputsGiveOneClearErrorLine) {
  expect_error(vit("train --data /nonexistent/dir --epochs 1 --out " + dir_->file("bad_run")),
               "[data] /nonexistent/dir: no such directory");
  expect_error(vit("train --preset vit_gigantic"), "[vit_config] unknown preset 'vit_gigantic'");
  expect_error(vit("train --dim 30 --heads 4 --data " + dir_->file("data")),
               "[vit_config] dim 30 is not divisible by num_heads 4");
  expect_error(vit("train --conv-stages 0 --image-size 30 --patch-size 7 --data " + dir_->file("data")),
               "[vit_config] image_size 30 is not divisible by patch_size 7");
  expect_error(vit("eval --checkpoint " + dir_->file("missing.safetensors")),
               "[file] " + dir_->file("missing.safetensors") + ": cannot open (No such file or directory)");
  // A corrupt IDX file names the file.
  std::filesystem::create_directories(dir_->file("bad"));
  std::filesystem::copy(dir_->file("data/t10k-labels-idx1-ubyte"), dir_->file("bad/train-labels-idx1-ubyte"));
  testing::write_bytes(dir_->file("bad/train-images-idx3-ubyte"), {0, 0, 8, 1, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28});
  expect_error(vit("train --epochs 1 --data " + dir_->file("bad") + " --out " + dir_->file("bad_run")),
               "[mnist] " + dir_->file("bad/train-images-idx3-ubyte") + ": wrong magic number");
  // An image that will not decode.
  testing::write_bytes(dir_->file("broken.png"), {0x89, 'P', 'N', 'G', 0, 1});
  expect_error(vit("predict --checkpoint " + dir_->file("run/last.safetensors") + " " + dir_->file("broken.png")),
               "[image] " + dir_->file("broken.png") + ": cannot decode");
  // A truncated checkpoint.
  auto bytes = testing::read_bytes(dir_->file("run/last.safetensors"));
  bytes.resize(bytes.size() / 2);
  testing::write_bytes(dir_->file("cut.safetensors"), bytes);
  expect_error(vit("eval --checkpoint " + dir_->file("cut.safetensors") + " --data " + dir_->file("data")),
               "[safetensors] " + dir_->file("cut.safetensors") + ":");
  // Resuming with a different model size names the checkpoint; nothing already written is lost.
  std::filesystem::copy(dir_->file("run"), dir_->file("run3"));
  const auto before = testing::read_bytes(dir_->file("run3/last.safetensors"));
  expect_error(vit("train --resume " + dir_->file("run3") + " --dim 32 --heads 2 --epochs 3"),
               "[train] " + dir_->file("run3/last.safetensors") + ": checkpoint is a different model");
  EXPECT_EQ(testing::read_bytes(dir_->file("run3/last.safetensors")), before);
  // --ema on a checkpoint trained without EMA is refused by eval and predict alike.
  ASSERT_EQ(
      vit("train --data " + dir_->file("data") + " --out " + dir_->file("no_ema") +
          " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 --epochs 1 --batch-size 32 --threads 1 --ema 0")
          .exit_code,
      0);
  const std::string no_ema = dir_->file("no_ema/last.safetensors");
  data::write_png(dir_->file("blank.png"), data::Image{1, 28, 28, std::vector<uint8_t>(784, 0)});
  expect_error(vit("eval --ema --checkpoint " + no_ema + " --data " + dir_->file("data")),
               "[checkpoint] " + no_ema + ": no EMA weights in this checkpoint");
  expect_error(vit("predict --ema --checkpoint " + no_ema + " " + dir_->file("blank.png")),
               "[checkpoint] " + no_ema + ": no EMA weights");
  EXPECT_EQ(
      vit("eval --ema --checkpoint " + dir_->file("run/last.safetensors") + " --data " + dir_->file("data")).exit_code,
      0);
  // Unknown flags and missing arguments are CLI11's errors, with a non-zero exit.
  EXPECT_NE(vit("train --bogus").exit_code, 0);
  EXPECT_NE(vit("predict").exit_code, 0);
  EXPECT_NE(vit("").exit_code, 0);
}

}  // namespace
}  // namespace vit
