// Hostile checkpoints through the `vit` command: a checkpoint written by checkpoint::save_checkpoint
// is edited in place as a user with a hex editor would (valid JSON, same length), and `vit eval`
// / `vit predict` refuse each edit in one "error: ..." line naming the field; what stays in range
// is caught by the checksum; NaN weights are refused unless --allow-nonfinite; a PNG given as a
// checkpoint is named a PNG; a non-standard width asks for --heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "data/image.h"
#include "io/npy.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::replace_in_file;
using testing::vit;

class HostileCheckpointCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::write_toy_mnist(dir_->file("data"), 64, 32);
    io::save_npy(dir_->file("input.npy"), Tensor::zeros({1, 1, 28, 28}));
  }
  static void TearDownTestSuite() { delete dir_; }
  // A fresh checkpoint with one in-place edit.
  static std::string edited(const std::string& name, const std::string& from, const std::string& to) {
    const std::string file = dir_->file(name);
    testing::write_tiny_checkpoint(file);
    replace_in_file(file, from, to);
    return file;
  }
  static CommandResult eval(const std::string& file, const std::string& flags = "") {
    return vit("eval --checkpoint " + file + " --data " + dir_->file("data") + " --threads 1" + flags);
  }
  static CommandResult predict(const std::string& file, const std::string& flags = "") {
    return vit("predict --checkpoint " + file + " --tensor " + dir_->file("input.npy") + " --threads 1" + flags);
  }
  // eval and predict both refuse `file` with this message, in one line naming the file once.
  static void expect_refused(const std::string& file, const std::string& message) {
    for (const CommandResult& r : {eval(file), predict(file)}) {
      expect_error(r, "[checkpoint] " + file + ": " + message);
      EXPECT_EQ(r.out.find("[checkpoint]"), r.out.rfind("[checkpoint]")) << r.out;
    }
  }
  static testing::TempDir* dir_;
};
testing::TempDir* HostileCheckpointCli::dir_ = nullptr;

TEST_F(HostileCheckpointCli, TheUneditedCheckpointRuns) {
  const std::string file = dir_->file("good.safetensors");
  testing::write_tiny_checkpoint(file);
  const CommandResult e = eval(file), p = predict(file);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  EXPECT_EQ(p.exit_code, 0) << p.out;
  EXPECT_EQ(e.out.find("warning"), std::string::npos) << e.out;
}

TEST_F(HostileCheckpointCli, EditedMetadataIsRefusedNamingTheField) {
  expect_refused(edited("mean.safetensors", "0.1307", "1.1307"),
                 "normalization mean[0] is 1.1307, outside [0, 1] (pixels are scaled to [0, 1])");
  expect_refused(edited("std.safetensors", "0.3081", "0.0000"), "normalization std[0] is 0, outside (0, 1]");
  expect_refused(edited("eps.safetensors", R"(\"eps\":1e-06)", R"(\"eps\":1e+10)"),
                 "model_config eps is 10000000000, outside (0, 0.01]");
  expect_refused(edited("names.safetensors", R"(\"1\")", R"(\"0\")"),
                 "class_names[1] '0' repeats an earlier class name");
  expect_refused(edited("depth.safetensors", R"(\"depth\":1)", R"(\"depth\":2)"),
                 "model_config depth is 2, but the weights have 1");
  // Once "[checkpoint] F: [checkpoint] F: ..." (a check inside the wrapper that adds the prefix).
  expect_refused(edited("epoch.safetensors", R"("epoch":"2")", R"("epoch":"x")"),
                 "metadata 'epoch' is 'x', not a non-negative integer");
}

TEST_F(HostileCheckpointCli, TheChecksumCatchesValidEditsAndFlippedBytes) {
  // 4 heads -> 1 is a valid config for width 16: only the checksum tells.
  const std::string heads = edited("heads.safetensors", R"(\"num_heads\":4)", R"(\"num_heads\":1)");
  expect_refused(heads, "checksum mismatch (the file was edited or corrupted): stored xxh64:");
  const std::string flipped = dir_->file("flipped.safetensors");
  testing::write_tiny_checkpoint(flipped);
  std::string bytes = testing::read_text_file(flipped);
  bytes[testing::data_offset(flipped) + 100] ^= 0x01;  // one bit of a weight
  testing::write_text_file(flipped, bytes);
  expect_refused(flipped, "checksum mismatch (the file was edited or corrupted): stored xxh64:");
  // A file without a checksum (written before them) runs, with a warning.
  const std::string old = dir_->file("old.safetensors");
  testing::write_tiny_checkpoint(old);
  testing::edit_metadata(old, [](nlohmann::json& m) { m.erase("checksum"); });
  const CommandResult r = predict(old);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + old + " has no checksum (written by an older vit)"), std::string::npos) << r.out;
}

TEST_F(HostileCheckpointCli, NonFiniteWeightsNeedAllowNonfinite) {
  const std::string file = dir_->file("nan.safetensors");
  testing::write_tiny_checkpoint(file, [](model::VisionTransformer& m, checkpoint::CheckpointInfo&) {
    for (auto& [name, t] : m.state_dict()) {
      if (name == "blocks.0.attn.qkv.weight") t.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
    }
  });
  expect_refused(file,
                 "tensor 'blocks.0.attn.qkv.weight' holds NaN at index 17 (1 non-finite value in the file); "
                 "refusing to load it (--allow-nonfinite loads it anyway)");
  const CommandResult p = predict(file, " --allow-nonfinite");
  EXPECT_EQ(p.exit_code, 0) << p.out;
  const CommandResult e = eval(file, " --allow-nonfinite");
  EXPECT_EQ(e.out.find("holds NaN"), std::string::npos) << e.out;
}

TEST_F(HostileCheckpointCli, OtherFilesAndGuessedHeads) {
  data::write_png(dir_->file("photo.png"), data::Image{1, 28, 28, std::vector<uint8_t>(784, 128)});
  expect_error(
      predict(dir_->file("photo.png")),
      "[file] " + dir_->file("photo.png") + ": not a file vit reads (it is a PNG image); vit reads safetensors");
  // timm weights 48 wide: no standard head count for that width.
  const std::string timm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";
  const std::string input = dir_->file("rgb.npy");
  io::save_npy(input, Tensor::zeros({1, 3, 32, 32}));
  expect_error(vit("predict --checkpoint " + timm + " --tensor " + input),
               "[checkpoint] " + timm +
                   ": width 48 is not a standard ViT width (192, 384, 768, 1024, 1280); its "
                   "number of attention heads cannot be inferred: pass --heads");
  const CommandResult ok = vit("predict --checkpoint " + timm + " --heads 4 --tensor " + input);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

}  // namespace
}  // namespace vit
