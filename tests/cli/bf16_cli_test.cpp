// bfloat16 through the `vit` command, as a user types it: `eval --precision bf16`, `quantize --dtype
// bf16` (a half-size file every command loads, running float32 by default and, with --precision
// bf16, exactly as the float file does), and `train --precision bf16` (mixed precision, a float32
// checkpoint).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "core/random.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

class Bf16Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    testing::write_toy_mnist(dir_->file("data"), 192, 64);
    // vit_digits (206k parameters), so that the file's header is small beside its weights.
    const CommandResult r = vit("train --preset vit_digits --data " + dir_->file("data") + " --out " +
                                dir_->file("run") + " --steps 6 --batch-size 32 --threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    Generator gen(3);
    io::save_npy(dir_->file("x.npy"), Tensor::randn({3, 1, 28, 28}, gen));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string f32() { return dir_->file("run/last.safetensors"); }
  static nlohmann::json eval_json(const std::string& checkpoint, const std::string& more = "") {
    const CommandResult r =
        vit("eval --checkpoint " + checkpoint + " --data " + dir_->file("data") + " --json " + more);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  }
  // The (3, 10) logits of `vit predict --tensor` as raw floats.
  static std::vector<float> logits(const std::string& checkpoint, const std::string& precision) {
    const std::string out = dir_->file("logits.npy");
    const CommandResult r = vit("predict --checkpoint " + checkpoint + " --tensor " + dir_->file("x.npy") + " --out " +
                                out + " --overwrite --precision " + precision);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const Tensor t = io::load_npy(out);
    EXPECT_EQ(t.shape(), (Shape{3, 10}));
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  }
  static TempDir* dir_;
};
TempDir* Bf16Cli::dir_ = nullptr;

TEST_F(Bf16Cli, EvalRunsInBf16) {
  const nlohmann::json e32 = eval_json(f32()), e16 = eval_json(f32(), "--precision bf16");
  EXPECT_EQ(e32["precision"], "fp32");
  EXPECT_EQ(e16["precision"], "bf16");
  EXPECT_EQ(e16["images"], 64);
  EXPECT_NE(e16["loss"], e32["loss"]);  // it ran in bf16 ...
  EXPECT_NEAR(e16["loss"].get<double>(), e32["loss"].get<double>(), 0.02 * e32["loss"].get<double>());  // ... closely
  EXPECT_NEAR(e16["top1"].get<double>(), e32["top1"].get<double>(), 3.0 / 64);
  const CommandResult text = vit("eval --checkpoint " + f32() + " --data " + dir_->file("data") + " --precision bf16");
  EXPECT_NE(text.out.find("(test split, 64 images, bf16)"), std::string::npos) << text.out;
  // Without AVX512_BF16 (forced here) the emulation runs and says so.
  const CommandResult emulated =
      vit("eval --checkpoint " + f32() + " --data " + dir_->file("data") + " --precision bf16 --json", "VIT_ISA=avx2");
  ASSERT_EQ(emulated.exit_code, 0) << emulated.out;
  EXPECT_NE(emulated.out.find("note: no AVX512_BF16 here"), std::string::npos) << emulated.out;
  // ... and does not claim the native kernels' numbers: it sums in another order.
  EXPECT_EQ(emulated.out.find("same numbers"), std::string::npos) << emulated.out;
  EXPECT_NE(emulated.out.find("not bit for bit"), std::string::npos) << emulated.out;
  const auto j = nlohmann::json::parse(emulated.out.substr(emulated.out.find('{')));
  EXPECT_NEAR(j["loss"].get<double>(), e16["loss"].get<double>(), 1e-4);
  const CommandResult bad = vit("eval --checkpoint " + f32() + " --data " + dir_->file("data") + " --precision fp16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--precision"), std::string::npos) << bad.out;
}

TEST_F(Bf16Cli, QuantizeBf16WritesAHalfSizeFileThatRunsAsTheFloatFile) {
  const std::string b16 = dir_->file("bf16.safetensors");
  const CommandResult q = vit("quantize --checkpoint " + f32() + " --out " + b16 + " --dtype bf16");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  EXPECT_NE(q.out.find("Linear and convolution weights to bf16"), std::string::npos) << q.out;
  // Half of the float32 weights (205,834 parameters, 4 bytes each), the header included.
  const double bytes = static_cast<double>(std::filesystem::file_size(b16)), f32_bytes = 4.0 * 205834;
  EXPECT_GT(bytes / f32_bytes, 0.48) << bytes;
  EXPECT_LT(bytes / f32_bytes, 0.55) << bytes;  // 0.525: float32 biases, tokens, norms, header
  const CommandResult info = vit("info --checkpoint " + b16);
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("bf16 file: Linear and convolution weights stored as bfloat16 (scheme vit-bf16-1)"),
            std::string::npos)
      << info.out;
  // bf16 inference of the file is bf16 inference of the float file, bit for bit; float32 (the
  // default) runs the widened weights: close to the float file, not the same.
  const std::vector<float> float_bf16 = logits(f32(), "bf16"), file_bf16 = logits(b16, "bf16");
  EXPECT_EQ(std::memcmp(float_bf16.data(), file_bf16.data(), float_bf16.size() * sizeof(float)), 0);
  const std::vector<float> float_f32 = logits(f32(), "fp32"), file_f32 = logits(b16, "fp32");
  EXPECT_NE(file_f32, float_f32);
  for (size_t i = 0; i < float_f32.size(); ++i) EXPECT_NEAR(file_f32[i], float_f32[i], 0.05) << i;
  EXPECT_EQ(eval_json(b16, "--precision bf16")["loss"], eval_json(f32(), "--precision bf16")["loss"]);
  // Every command that reads our files reads it.
  EXPECT_EQ(
      vit("embed --checkpoint " + b16 + " --tensor " + dir_->file("x.npy") + " --out " + dir_->file("e.npy")).exit_code,
      0);
  EXPECT_EQ(vit("bench --checkpoint " + b16 + " --batch 2 --iters 2 --json").exit_code, 0);
  const std::string q8 = dir_->file("from_bf16_int8.safetensors");
  EXPECT_EQ(vit("quantize --checkpoint " + b16 + " --out " + q8).exit_code, 0);  // int8 of it: a float model
  // Refused: --bits with bf16 (naming both flags), an int8 input, another dtype.
  expect_error(
      vit("quantize --checkpoint " + f32() + " --out " + dir_->file("x.safetensors") + " --dtype bf16 --bits 7"),
      "[quantize] --bits 7 is for --dtype int8");
  expect_error(vit("quantize --checkpoint " + q8 + " --out " + dir_->file("y.safetensors") + " --dtype bf16"),
               "[quantize] " + q8 + ": already an int8 model");
  EXPECT_NE(vit("quantize --checkpoint " + f32() + " --out " + dir_->file("z.safetensors") + " --dtype fp16").exit_code,
            0);
}

// The train loss of epoch `epoch` in the output of `vit train` ("epoch 3/3  train loss 2.1234 ...").
double train_loss(const std::string& out, int epoch) {
  const std::string tag = "epoch " + std::to_string(epoch) + "/";
  const size_t at = out.find(tag);
  EXPECT_NE(at, std::string::npos) << out;
  const size_t loss = out.find("train loss ", at);
  return at == std::string::npos || loss == std::string::npos ? 0.0 : std::stod(out.substr(loss + 11));
}

TEST_F(Bf16Cli, TrainBf16LowersTheLossAndWritesAFloat32Checkpoint) {
  const std::string run = dir_->file("run_bf16");
  const std::string model =
      " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 --pool mean --batch-size 32 --threads 1";
  const CommandResult r =
      vit("train --data " + dir_->file("data") + " --out " + run + model + " --epochs 3 --precision bf16");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("mixed precision: bf16 inputs, float32 accumulation"), std::string::npos) << r.out;
  EXPECT_LT(train_loss(r.out, 3), train_loss(r.out, 1)) << r.out;
  // The checkpoint is float32 (weights, optimizer state, EMA) and records the run's precision.
  const io::WeightsFile f = io::load_safetensors(run + "/last.safetensors");
  for (const auto& span : f.spans) {
    EXPECT_EQ(span.dtype, span.name == "optimizer.step" ? "F64" : "F32") << span.name;  // the step count: F64
  }
  EXPECT_NE(f.metadata.at("train_config").find("\"precision\":\"bf16\""), std::string::npos);
  EXPECT_EQ(eval_json(run + "/last.safetensors")["precision"], "fp32");  // it evaluates as any float file
  // A resumed run keeps its precision.
  const CommandResult changed = vit("train --resume " + run + " --epochs 4 --precision fp32");
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_NE(changed.out.find("--precision fp32 (the run's bf16)"), std::string::npos) << changed.out;
  // Without AVX512_BF16 (forced here) the AVX2 float32 arithmetic on bf16 values trains, and says so once.
  const CommandResult emulated = vit("train --data " + dir_->file("data") + " --out " + dir_->file("run_emulated") +
                                         model + " --steps 2 --precision bf16",
                                     "VIT_ISA=avx2");
  ASSERT_EQ(emulated.exit_code, 0) << emulated.out;
  const std::string note = "note: no AVX512_BF16 here";
  ASSERT_NE(emulated.out.find(note), std::string::npos) << emulated.out;
  EXPECT_EQ(emulated.out.find(note), emulated.out.rfind(note)) << emulated.out;
  EXPECT_NE(emulated.out.find("(AVX2 float32)"), std::string::npos) << emulated.out;
  EXPECT_NE(emulated.out.find("float32 AVX2 arithmetic on the bfloat16 values"), std::string::npos) << emulated.out;
  // Below AVX2, the plain C++ path (slow, the same values).
  const CommandResult plain = vit("train --data " + dir_->file("data") + " --out " + dir_->file("run_plain") + model +
                                      " --steps 1 --precision bf16",
                                  "VIT_ISA=scalar");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_NE(plain.out.find("(plain C++)"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("a plain C++ emulation"), std::string::npos) << plain.out;
  // vit bench times a mixed-precision training step.
  const CommandResult bench =
      vit("bench --preset vit_digits --train --batch 4 --iters 1 --warmup 0 --precision bf16 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  EXPECT_EQ(nlohmann::json::parse(bench.out)["precision"], "bf16") << bench.out;
  expect_error(vit("bench --preset vit_digits --graph --batch 2 --iters 1 --precision bf16"),
               "[bench] --precision bf16 is for the inference path and --train");
  const CommandResult bad = vit("train --data " + dir_->file("data") + " --out " + dir_->file("run_bad") + model +
                                " --steps 2 --precision fp16");
  expect_error(bad, "[train] --precision: must be one of fp32, bf16, got 'fp16'");
}

// A finite float32 weight past bfloat16's range (>= 3.3895e38 rounds to infinity): running it in
// bf16 or storing it as bf16 is refused, naming why, never answered with infinite logits or
// written as a file no load accepts.
TEST_F(Bf16Cli, AWeightPastBfloat16sRangeIsRefusedNotMadeInfinite) {
  checkpoint::LoadedCheckpoint c = checkpoint::load_checkpoint(f32());
  auto model = checkpoint::model_from_checkpoint(c);
  bool set = false;
  for (auto& [name, p] : model->named_parameters()) {
    if (name == "head.weight") {
      p.data().data<float>()[0] = 3.3970e38f;
      set = true;
    }
  }
  ASSERT_TRUE(set);
  const std::string big = dir_->file("big.safetensors");
  c.info.evaluated = "";  // the loaded set alone is saved
  checkpoint::save_checkpoint(big, *model, c.info);
  const CommandResult run = vit("predict --checkpoint " + big + " --tensor " + dir_->file("x.npy") + " --out " +
                                dir_->file("big.npy") + " --overwrite --precision bf16");
  EXPECT_NE(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("past bfloat16's largest finite value"), std::string::npos) << run.out;
  EXPECT_FALSE(std::filesystem::exists(dir_->file("big.npy")));
  const CommandResult q =
      vit("quantize --checkpoint " + big + " --out " + dir_->file("big16.safetensors") + " --dtype bf16");
  EXPECT_NE(q.exit_code, 0) << q.out;
  EXPECT_NE(q.out.find("weight 'head.weight' holds 3.397e+38"), std::string::npos) << q.out;
  EXPECT_FALSE(std::filesystem::exists(dir_->file("big16.safetensors")));
}

// --precision bf16 on an int8 file changes its float32 layers' numbers: said, not silent.
TEST_F(Bf16Cli, Bf16OnAnInt8ModelSaysWhatItChanges) {
  const std::string q8 = dir_->file("note8.safetensors");
  ASSERT_EQ(vit("quantize --checkpoint " + f32() + " --out " + q8).exit_code, 0);
  const std::string args = "predict --checkpoint " + q8 + " --tensor " + dir_->file("x.npy") + " --out " +
                           dir_->file("note8.npy") + " --overwrite --precision ";
  const CommandResult b16 = vit(args + "bf16"), f32run = vit(args + "fp32");
  ASSERT_EQ(b16.exit_code, 0) << b16.out;
  EXPECT_NE(b16.out.find("is an int8 model: its int8 Linear layers run as int8"), std::string::npos) << b16.out;
  EXPECT_EQ(f32run.out.find("is an int8 model"), std::string::npos) << f32run.out;
}

}  // namespace
}  // namespace vit
