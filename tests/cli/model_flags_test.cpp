// The model flags shared by `vit train`, `vit bench` and `vit info` (cli/model_flags.h): the
// same flag means the same ViTConfig field in each, overrides the preset it is given with, names
// the model "custom" without one, is refused next to --checkpoint, and a bad value is the
// library's "[vit_config] ..." error.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/architecture.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

bool contains(const CommandResult& r, const std::string& text) { return r.out.find(text) != std::string::npos; }

TEST(ModelFlags, InfoAppliesThemOverThePreset) {
  const CommandResult plain = vit("info --preset vit_digits");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_TRUE(contains(plain, "patch 7 -> 16 patches, 16 tokens")) << plain.out;
  const CommandResult patch4 = vit("info --preset vit_digits --patch-size 4");
  ASSERT_EQ(patch4.exit_code, 0) << patch4.out;
  EXPECT_EQ(patch4.out.rfind("vit_digits\n", 0), 0u) << patch4.out;  // a preset with flags keeps its name
  EXPECT_TRUE(contains(patch4, "image 1x28x28, patch 4 -> 49 patches, 49 tokens")) << patch4.out;  // mean pool
  EXPECT_TRUE(contains(patch4, "pos_embed              3136")) << patch4.out;                      // 49 x 64
  // Every kind of field: ints, doubles, a string, a bool flag and its negation.
  model::ViTConfig c = model::preset("vit_digits");
  c.mlp_dim = 50;
  c.representation_size = 24;
  c.eps = 1e-5;
  c.qkv_bias = false;
  c.pool = "cls";
  c.dropout = 0.25;
  const CommandResult custom =
      vit("info --preset vit_digits --mlp-dim 50 --representation-size 24 --eps 1e-5 "
          "--no-qkv-bias --pool cls --dropout 0.25");
  ASSERT_EQ(custom.exit_code, 0) << custom.out;
  EXPECT_TRUE(contains(custom, "mlp 50, qkv_bias no, pool cls, eps 1e-05, classes 10")) << custom.out;
  EXPECT_TRUE(contains(custom, "dropout 0.25,")) << custom.out;
  EXPECT_TRUE(contains(custom, "pre_logits")) << custom.out;
  EXPECT_TRUE(
      contains(custom, fmt::format("  {:<12} {:>14}\n", "total", static_cast<int64_t>(model::parameter_count(c)))))
      << custom.out;
  EXPECT_TRUE(contains(vit("info --preset vit_digits --no-qkv-bias --qkv-bias"), "qkv_bias yes"));  // the last wins
  // Flags without --preset: the default model, named custom.
  const CommandResult unnamed = vit("info --dim 32 --heads 2");
  ASSERT_EQ(unnamed.exit_code, 0) << unnamed.out;
  EXPECT_EQ(unnamed.out.rfind("custom\n", 0), 0u) << unnamed.out;
  EXPECT_TRUE(contains(unnamed, "dim 32, depth 6, heads 2")) << unnamed.out;
}

// The hybrid ViT: --stem-layers / --stem-channels put 3x3 convolutions before the patch
// embedding; info shows them, train writes a checkpoint that eval and predict run (the graph-free
// inference path), and a stem without channels is the config's error.
TEST(ModelFlags, AConvolutionalStemTrainsAndItsCheckpointRuns) {
  const CommandResult info = vit("info --preset vit_digits --stem-layers 2 --stem-channels 8");
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_TRUE(contains(info, "stem: 2 x (3x3 convolution to 8 channels + GELU) before the patch embedding"))
      << info.out;
  // (8*1*9 + 8) + (8*8*9 + 8) parameters; 784 pixels x 9 x 8 x (1 + 8) MACs
  EXPECT_TRUE(contains(info, fmt::format("  {:<12} {:>14}\n", "stem", 8 * 9 + 8 + 8 * 8 * 9 + 8))) << info.out;
  EXPECT_TRUE(contains(info, fmt::format("stem {:.3f}, ", 784.0 * 9 * 8 * 9 / 1e9))) << info.out;
  EXPECT_TRUE(contains(info, fmt::format("  {:<12} {:>14}\n", "patch_embed", 64 * 8 * 49 + 64))) << info.out;
  expect_error(vit("info --preset vit_digits --stem-layers 1"),
               "[vit_config] stem_channels 0 with stem_layers 1: a stem needs 1..4096 channels, no stem needs 0");
  expect_error(vit("info --preset vit_digits --stem-layers 9 --stem-channels 8"),
               "[vit_config] stem_layers must be in [0, 8], got 9");
  expect_error(vit("info --preset vit_digits --stem-layers -1 --stem-channels 8"),
               "[vit_config] stem_layers must be in [0, 8], got -1");
  expect_error(vit("info --preset vit_digits --stem-layers 1 --stem-channels 5000"),
               "[vit_config] stem_channels 5000 with stem_layers 1: a stem needs 1..4096 channels, no stem needs 0");
  for (const char* bad : {"--stem-layers x", "--stem-layers 1 --stem-channels nan"}) {
    const CommandResult r = vit(std::string("info --preset vit_digits ") + bad);
    EXPECT_NE(r.exit_code, 0) << bad << "\n" << r.out;
    EXPECT_TRUE(contains(r, "[model] --stem-")) << bad << "\n" << r.out;
    EXPECT_TRUE(contains(r, ": must be a whole number, got '")) << bad << "\n" << r.out;
  }
  // An empty value would read as 0 (no stem): refused, for every model flag.
  for (const char* flag : {"--stem-layers", "--stem-channels", "--representation-size", "--mlp-dim", "--pool"}) {
    const CommandResult r = vit(std::string("info --preset vit_digits ") + flag + " ''");
    EXPECT_NE(r.exit_code, 0) << flag << "\n" << r.out;
    EXPECT_TRUE(contains(r, std::string(flag) + ": must not be empty")) << flag << "\n" << r.out;
  }

  testing::TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 96, 32);
  const CommandResult train =
      vit("train --data " + dir.file("data") + " --out " + dir.file("run") +
          " --preset vit_digits --stem-layers 1 --stem-channels 4 --dim 16 --depth 1 --heads 2 --epochs 1 "
          "--batch-size 32 --threads 1");
  ASSERT_EQ(train.exit_code, 0) << train.out;
  // A stem far too big for the machine is refused by its memory estimate before anything is written.
  expect_error(vit("train --data " + dir.file("data") + " --out " + dir.file("huge") +
                   " --preset vit_digits --stem-layers 8 --stem-channels 4096 --image-size 224 --patch-size 16"),
               "[memory] training vit_digits with batch");
  EXPECT_FALSE(std::filesystem::exists(dir.file("huge")));
  const CommandResult eval =
      vit("eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("data") + " --json");
  ASSERT_EQ(eval.exit_code, 0) << eval.out;
  EXPECT_EQ(nlohmann::json::parse(eval.out)["images"], 32);
  const CommandResult again = vit("info --checkpoint " + dir.file("run/last.safetensors"));
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_TRUE(contains(again, "stem: 1 x (3x3 convolution to 4 channels + GELU)")) << again.out;
}

// The hybrid's backbone flags: described by vit info, refused with the config's or the flag's
// message when out of range, not a number, past int64 or empty.
TEST(ModelFlags, AConvolutionalBackboneIsDescribedAndItsBadValuesRefused) {
  const CommandResult info =
      vit("info --preset vit_digits --conv-stages 2 --conv-channels 32 --conv-blocks 1 --conv-stem-stride 2 "
          "--patch-size 4");
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_TRUE(contains(info,
                       "backbone: 3x3 stem (stride 2) + 2 ResNet stages x 1 block, 32 to 64 channels, BatchNorm, "
                       "a 7x7 map in 1x1 patches"))
      << info.out;
  expect_error(vit("info --preset vit_digits --conv-stages -1"), "[vit_config] conv_stages must be in [0, 5], got -1");
  expect_error(
      vit("info --preset vit_digits --conv-stages 2 --conv-channels 9000000000000000000 --conv-blocks 1 "
          "--patch-size 4"),
      "[vit_config] conv_channels must be > 0 and the last stage's 9000000000000000000 x 2^1 at most 4096, got "
      "9000000000000000000");
  expect_error(vit("info --preset vit_digits --conv-stem-stride 2"),
               "[vit_config] conv_channels 0, conv_blocks 0 and conv_stem_stride 2 need conv_stages > 0 (0 stages: no "
               "convolutional backbone)");
  for (const char* bad : {"--conv-stages x", "--conv-stages 99999999999999999999", "--conv-channels nan"}) {
    const CommandResult r = vit(std::string("info --preset vit_digits ") + bad);
    EXPECT_NE(r.exit_code, 0) << bad << "\n" << r.out;
    EXPECT_TRUE(contains(r, ": must be a whole number, got '")) << bad << "\n" << r.out;
  }
  for (const char* flag : {"--conv-stages", "--conv-channels", "--conv-blocks", "--conv-stem-stride"}) {
    const CommandResult r = vit(std::string("info --preset vit_digits ") + flag + " ''");
    EXPECT_NE(r.exit_code, 0) << flag << "\n" << r.out;
    EXPECT_TRUE(contains(r, std::string(flag) + ": must not be empty")) << flag << "\n" << r.out;
  }
}

TEST(ModelFlags, BenchTimesTheModelTheFlagsDescribe) {
  const CommandResult r = vit("bench --preset vit_digits --patch-size 4 --train --iters 1 --warmup 0 --batch 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "vit_digits");
  EXPECT_EQ(j["mode"], "train");
  EXPECT_EQ(j["batch"], 8);
  // The size the bench refuses under a small memory limit is the patch-4 model's (49 tokens),
  // not the preset's (16 tokens).
  model::ViTConfig patch4 = model::preset("vit_digits");
  patch4.patch_size = 4;
  const std::string estimate = model::memory_estimate(patch4, 8, true).describe();
  ASSERT_NE(estimate, model::memory_estimate(model::preset("vit_digits"), 8, true).describe());
  expect_error(vit("bench --preset vit_digits --patch-size 4 --train --iters 1 --warmup 0 --batch 8",
                   "VIT_MEMORY_LIMIT=1000000"),
               "[memory] training vit_digits with batch 8 (" + estimate + ")");
  // Without --preset: the bench's default preset with the flags over it, named custom.
  const CommandResult custom = vit("bench --dim 32 --heads 2 --depth 1 --iters 1 --warmup 0 --json");
  ASSERT_EQ(custom.exit_code, 0) << custom.out;
  EXPECT_EQ(nlohmann::json::parse(custom.out)["model"], "custom");
}

TEST(ModelFlags, BadValuesAreTheConfigsErrors) {
  const std::string message = "[vit_config] image_size 28 is not divisible by patch_size 5";
  expect_error(vit("bench --preset vit_digits --patch-size 5 --train --iters 1 --warmup 0 --batch 8 --json"), message);
  expect_error(vit("info --preset vit_digits --patch-size 5"), message);
  expect_error(vit("train --patch-size 5 --data /nonexistent"), message);
  expect_error(vit("train --representation-size -1 --data /nonexistent"),
               "[vit_config] representation_size must be >= 0, got -1");
  // With a checkpoint the model is the file's: flags that would change it are refused.
  for (const char* command : {"info", "bench"}) {
    const CommandResult r = vit(std::string(command) + " --checkpoint x.safetensors --patch-size 4");
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_TRUE(contains(r, "--patch-size excludes --checkpoint")) << r.out;
  }
}

}  // namespace
}  // namespace vit
