// PyTorch .pth/.bin and JAX .npz files through the `vit` command, as a user types it: predict,
// info, eval-style loading, quantize and convert take them like safetensors; --ema picks a
// training checkpoint's EMA state dict; hostile files are one clear error line and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>

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

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/pth/";
const std::string kLayouts = std::string(VIT_GOLDEN_DIR) + "/layouts/";

class PyTorchFilesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const io::WeightsFile expected = io::load_safetensors(kDir + "expected.safetensors");
    io::save_npy(dir_.file("x.npy"), expected.get("input").to(DType::F32));
  }
  // `vit predict --tensor` logits of a checkpoint, as raw bytes of the written .npy.
  std::vector<uint8_t> logits(const std::string& checkpoint, const std::string& flags = "--heads 4") {
    const std::string out = dir_.file("logits.npy");
    const CommandResult r = vit("predict --checkpoint " + checkpoint + " " + flags + " --tensor " + dir_.file("x.npy") +
                                " --out " + out + " --overwrite");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return testing::read_bytes(out);
  }
  TempDir dir_;
};

TEST_F(PyTorchFilesCli, PredictReadsPthBinAndNpzAsItReadsSafetensors) {
  const std::vector<uint8_t> timm = logits(kLayouts + "timm.safetensors");
  EXPECT_EQ(logits(kDir + "timm_train.pth"), timm);
  EXPECT_EQ(logits(kDir + "views.pth"), timm);
  EXPECT_EQ(logits(kDir + "jax.npz", ""), timm);  // the head count comes from the JAX kernels
  EXPECT_EQ(logits(kDir + "torchvision.pth"), logits(kLayouts + "torchvision.safetensors"));
  EXPECT_EQ(logits(kDir + "pytorch_model.bin"), logits(kLayouts + "hf.safetensors"));
  EXPECT_NE(logits(kDir + "ddp.pth", "--heads 4 --ema"), timm);  // the EMA state dict, other weights
}

TEST_F(PyTorchFilesCli, InfoListsWhatWasSkippedAndConvertWritesOneOfOurs) {
  const CommandResult info = vit("info --checkpoint " + kDir + "timm_train.pth --heads 4");
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("timm layout; PyTorch (torch.save) file, state dict 'model'; skipped:"), std::string::npos)
      << info.out;
  EXPECT_NE(info.out.find("args (argparse.Namespace, never run)"), std::string::npos) << info.out;

  // vit convert: the EMA weights of a DDP checkpoint, once, into our format; it then loads without
  // --heads (the config is in its metadata) and predicts exactly as the .pth with --ema did.
  const std::string out = dir_.file("ema.safetensors");
  const CommandResult c = vit("convert " + kDir + "ddp.pth " + out + " --heads 4 --ema");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("converted " + kDir + "ddp.pth (timm layout) -> " + out), std::string::npos) << c.out;
  EXPECT_EQ(logits(out, ""), logits(kDir + "ddp.pth", "--heads 4 --ema"));
  const CommandResult again = vit("info --checkpoint " + out);
  EXPECT_NE(again.out.find("vit layout"), std::string::npos) << again.out;  // ours now: config in the metadata
  // The one rule for written files: an existing output is kept without --overwrite.
  expect_error(vit("convert " + kDir + "ddp.pth " + out + " --heads 4"),
               "[convert] output " + out + " exists (--overwrite replaces it)");
  // A JAX file converts with its head count, and quantizes like any other.
  const std::string jax = dir_.file("jax.safetensors");
  ASSERT_EQ(vit("convert " + kDir + "jax_prelogits.npz " + jax).exit_code, 0);
  EXPECT_EQ(logits(jax, ""), logits(kDir + "jax_prelogits.npz", ""));
  const CommandResult q =
      vit("quantize --checkpoint " + kDir + "bf16.pth --heads 4 --out " + dir_.file("q.safetensors"));
  EXPECT_EQ(q.exit_code, 0) << q.out;
}

TEST_F(PyTorchFilesCli, HostileFilesAreOneErrorLine) {
  const std::string h = kDir + "hostile/";
  expect_error(vit("predict --checkpoint " + h + "os_system.pth --heads 4 --tensor " + dir_.file("x.npy")),
               "[pickle] " + h + "os_system.pth");
  expect_error(vit("info --checkpoint " + h + "npz_bomb_declared.npz"), "[zip] " + h + "npz_bomb_declared.npz");
  expect_error(vit("convert " + h + "legacy.pth " + dir_.file("legacy.safetensors")),
               "[pytorch] " + h + "legacy.pth: a PyTorch checkpoint in the legacy format");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("legacy.safetensors")));
  expect_error(vit("predict --checkpoint " + kDir + "timm_train.pth --heads 4 --ema --tensor " + dir_.file("x.npy")),
               "[checkpoint] " + kDir + "timm_train.pth: --ema picks the EMA weights");
}

}  // namespace
}  // namespace vit
