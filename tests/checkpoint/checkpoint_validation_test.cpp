// Hostile checkpoints: every metadata value of a vit checkpoint is checked (an edit that keeps
// valid JSON is refused naming the field and value, with or without a checksum), the checksum
// catches what stays in range (num_heads 4 -> 1, mean 0.1307 -> 0.1306, a flipped data byte),
// NaN/Inf weights are refused in our files and foreign ones unless allowed, and a nested error
// names the file once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "infer/load_model.h"
#include "io/safetensors.h"
#include "support/errors.h"
#include "support/files.h"
#include "support/tiny_checkpoint.h"

namespace vit::checkpoint {
namespace {

using infer::load_model;
using infer::LoadedModel;
using infer::LoadSettings;
using testing::edit_metadata;
using ::testing::HasSubstr;
using testing::replace_in_file;
using testing::write_tiny_checkpoint;

using testing::error_of;

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class HostileCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_checkpoint(file_); }
  // The error of loading after `edit` of the metadata, checked to name the file exactly once;
  // the same edit in a file without a checksum (as older versions wrote) gives the same error.
  std::string refused_after(const std::function<void(nlohmann::json&)>& edit) {
    edit_metadata(file_, edit);
    const std::string e = error_of([&] { load_checkpoint(file_); });
    EXPECT_EQ(count_of(e, "[checkpoint]"), 1u) << e;
    EXPECT_EQ(e.rfind("[checkpoint] " + file_ + ": ", 0), 0u) << e;
    edit_metadata(file_, [](nlohmann::json& m) { m.erase("checksum"); });
    EXPECT_EQ(error_of([&] { load_checkpoint(file_); }), e);
    EXPECT_EQ(error_of([&] { load_model(file_); }), e);
    write_tiny_checkpoint(file_);
    return e;
  }
  // Edits one field of the JSON held in metadata `key`.
  std::string refused_after_json(const std::string& key, const std::function<void(nlohmann::json&)>& edit) {
    return refused_after([&](nlohmann::json& m) {
      nlohmann::json j = nlohmann::json::parse(m[key].get<std::string>());
      edit(j);
      m[key] = j.dump();
    });
  }
  testing::TempDir dir_;
  std::string file_ = dir_.file("tiny.safetensors");
};

TEST_F(HostileCheckpoint, TheUneditedFileLoadsWithAVerifiedChecksum) {
  const LoadedCheckpoint c = load_checkpoint(file_);
  EXPECT_EQ(c.checksum.rfind("xxh64:", 0), 0u);
  EXPECT_EQ(c.info.normalization.mean, std::vector<double>{0.1307});
  EXPECT_EQ(load_model(file_).checksum, c.checksum);
  // A file from before checksums loads (and says it is unverified: an empty checksum).
  edit_metadata(file_, [](nlohmann::json& m) { m.erase("checksum"); });
  EXPECT_TRUE(load_checkpoint(file_).checksum.empty());
}

TEST_F(HostileCheckpoint, NormalisationEditsAreRefusedByName) {
  using J = nlohmann::json;
  EXPECT_THAT(refused_after_json("normalization", [](J& n) { n["mean"] = {1.1307}; }),
              HasSubstr("normalization mean[0] is 1.1307, outside [0, 1]"));
  EXPECT_THAT(refused_after_json("normalization", [](J& n) { n["mean"] = {-0.1}; }), HasSubstr("mean[0] is -0.1"));
  EXPECT_THAT(refused_after_json("normalization", [](J& n) { n["std"] = {0}; }),
              HasSubstr("normalization std[0] is 0, outside (0, 1]"));
  EXPECT_THAT(refused_after_json("normalization", [](J& n) { n["std"] = {255.0}; }), HasSubstr("std[0] is 255"));
  EXPECT_THAT(refused_after_json("normalization",
                                 [](J& n) {
                                   n["mean"] = {0.5, 0.5, 0.5};
                                 }),
              HasSubstr("normalization has 3 means and 1 stds for a model of 1 input channels"));
  EXPECT_THAT(refused_after_json("normalization", [](J& n) { n.erase("std"); }),
              HasSubstr("metadata 'normalization' is not {\"mean\": [...], \"std\": [...]}"));
  EXPECT_THAT(refused_after([](J& m) { m["normalization"] = R"({"mean":[0.1],"std":[1e999]})"; }),
              HasSubstr("normalization"));
}

TEST_F(HostileCheckpoint, ModelConfigEditsAreRefusedByName) {
  using J = nlohmann::json;
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["eps"] = 1e10; }),
              HasSubstr("model_config eps is 10000000000, outside (0, 0.01]"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["eps"] = 0; }),
              HasSubstr("model_config: [vit_config] eps must be positive, got 0"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["num_heads"] = 3; }),
              HasSubstr("model_config: [vit_config] dim 16 is not divisible by num_heads 3"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["depth"] = 2; }),
              HasSubstr("model_config depth is 2, but the weights have 1"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["dim"] = 32; }),
              HasSubstr("model_config dim is 32, but the weights have 16"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["num_classes"] = 12; }),
              HasSubstr("model_config num_classes is 12, but the weights have 10"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["mlp_ratio"] = 4.0; }),
              HasSubstr("model_config mlp hidden size (mlp_dim, mlp_ratio) is 64, but the weights have 32"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["pool"] = "cls"; }),
              HasSubstr("model_config pool is 'cls', but the weights are of a 'mean'-pooled model"));
  EXPECT_THAT(refused_after_json("model_config", [](J& c) { c["image_size"] = 35; }),
              HasSubstr("model_config image_size is 35, but the weights have 28"));
}

TEST_F(HostileCheckpoint, ClassNameEditsAreRefusedByName) {
  using J = nlohmann::json;
  EXPECT_THAT(refused_after_json("class_names", [](J& n) { n[1] = "0"; }),
              HasSubstr("class_names[1] '0' repeats an earlier class name"));
  EXPECT_THAT(refused_after_json("class_names", [](J& n) { n[3] = ""; }), HasSubstr("class_names[3] is empty"));
  EXPECT_THAT(refused_after_json("class_names", [](J& n) { n.push_back("ten"); }),
              HasSubstr("class_names has 11 names for a model of 10 classes"));
  EXPECT_THAT(refused_after([](J& m) { m["class_names"] = R"({"0":"zero"})"; }),
              HasSubstr("metadata 'class_names' is not a JSON list of strings"));
}

TEST_F(HostileCheckpoint, ProgressEditsAreRefusedByName) {
  using J = nlohmann::json;
  // Once "[checkpoint] F: [checkpoint] F: negative epoch/step/batch" (the check inside a wrapper).
  EXPECT_THAT(refused_after([](J& m) { m["epoch"] = "-1"; }),
              HasSubstr("metadata 'epoch' is '-1', not a non-negative"));
  EXPECT_THAT(refused_after([](J& m) { m["step"] = "40abc"; }), HasSubstr("metadata 'step' is '40abc'"));
  EXPECT_THAT(refused_after([](J& m) { m["step"] = "1"; }), HasSubstr("step 1 is less than epoch 2 + batch 0"));
  EXPECT_THAT(refused_after([](J& m) { m["epoch"] = "4"; }),
              HasSubstr("epoch 4 (batch 0) is past the end of train_config's 3 epochs"));
  EXPECT_THAT(refused_after([](J& m) { m["batch"] = "5"; }),
              HasSubstr("epoch_stats 'steps' is missing or not a count (batch 5 is mid-epoch)"));
  EXPECT_THAT(refused_after([](J& m) {
                m["batch"] = "5";
                m["epoch_stats"] = R"({"loss_sum":1.0,"correct":3,"seen":80,"steps":3,"skipped":1,"seconds":2.0})";
              }),
              HasSubstr("epoch_stats (3 steps + 1 skipped, 3 of 80 correct) do not add up to batch 5"));
  EXPECT_THAT(refused_after([](J& m) { m["elapsed_seconds"] = "nan"; }),
              HasSubstr("metadata 'elapsed_seconds' is 'nan', not a finite number >= 0"));
  EXPECT_THAT(refused_after([](J& m) { m["optimizer"] = "adam"; }), HasSubstr("metadata 'optimizer' is 'adam'"));
  EXPECT_THAT(refused_after([](J& m) { m["train_config"] = "[1]"; }), HasSubstr("must be JSON objects"));
  edit_metadata(file_, [](J& m) { m["checksum"] = "md5:0"; });
  EXPECT_EQ(
      error_of([&] { load_checkpoint(file_); }),
      "[checkpoint] " + file_ + ": metadata 'checksum' is 'md5:0', not an xxh64 checksum (xxh64: and 16 hex digits)");
  write_tiny_checkpoint(file_);
  // Once "[checkpoint] F: [checkpoint] F: not a checkpoint written by vit train (no 'train_config' ...)".
  EXPECT_THAT(refused_after([](J& m) { m.erase("train_config"); }), HasSubstr("no 'train_config' in its metadata"));
}

TEST_F(HostileCheckpoint, TheChecksumCatchesWhatStaysInRange) {
  // num_heads 4 -> 1 and mean 0.1307 -> 0.1306 are valid values: only the checksum tells.
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{R"(\"num_heads\":4)", R"(\"num_heads\":1)"}, {"0.1307", "0.1306"}}) {
    write_tiny_checkpoint(file_);
    replace_in_file(file_, from, to);
    const std::string e = error_of([&] { load_checkpoint(file_); });
    EXPECT_THAT(e, HasSubstr("[checkpoint] " + file_ +
                             ": checksum mismatch (the file was edited or corrupted): stored "
                             "xxh64:"))
        << from;
    EXPECT_THAT(error_of([&] { load_model(file_); }), HasSubstr("checksum mismatch")) << from;
  }
  // One data byte: the last byte of the last tensor.
  write_tiny_checkpoint(file_);
  std::string bytes = testing::read_text_file(file_);
  bytes.back() ^= 0x10;
  testing::write_text_file(file_, bytes);
  EXPECT_THAT(error_of([&] { load_checkpoint(file_); }), HasSubstr("checksum mismatch"));
}

TEST_F(HostileCheckpoint, NonFiniteWeightsAreRefusedUnlessAllowed) {
  write_tiny_checkpoint(file_, [](model::VisionTransformer& m, CheckpointInfo&) {
    for (auto& [name, t] : m.state_dict()) {
      if (name == "blocks.0.attn.qkv.weight") t.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
      if (name == "head.bias") t.data<float>()[2] = -std::numeric_limits<float>::infinity();
    }
  });
  const std::string expected =
      "[checkpoint] " + file_ +
      ": tensor 'blocks.0.attn.qkv.weight' holds NaN at index 17 "
      "(2 non-finite values in the file); refusing to load it (--allow-nonfinite loads it anyway)";
  EXPECT_EQ(error_of([&] { load_checkpoint(file_); }), expected);
  EXPECT_EQ(error_of([&] { load_model(file_); }), expected);
  const LoadedCheckpoint c = load_checkpoint(file_, {.allow_nonfinite = true});
  EXPECT_FALSE(c.checksum.empty());  // still verified
  LoadSettings allow;
  allow.allow_nonfinite = true;
  EXPECT_NO_THROW(load_model(file_, allow));
}

TEST(ForeignCheckpoint, NonFiniteWeightsAreRefusedUnlessAllowed) {
  testing::TempDir dir;
  const io::WeightsFile timm = io::load_safetensors(std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [key, t] : timm.tensors) tensors.emplace_back(key, t.clone());
  for (auto& [key, t] : tensors) {
    if (key == "blocks.1.mlp.fc2.weight") t.data<float>()[5] = std::numeric_limits<float>::infinity();
  }
  const std::string file = dir.file("timm_inf.safetensors");
  io::save_safetensors(file, tensors);
  LoadSettings options;
  options.num_heads = 4;
  EXPECT_EQ(error_of([&] { load_model(file, options); }),
            "[checkpoint] " + file +
                ": tensor 'blocks.1.mlp.fc2.weight' holds Inf at index 5 (1 non-finite value in "
                "the file); refusing to load it (--allow-nonfinite loads it anyway)");
  options.allow_nonfinite = true;
  EXPECT_NO_THROW(load_model(file, options));
}

TEST(CheckpointSave, RefusesWhatWouldNotLoadAndWritesNothing) {
  testing::TempDir dir;
  const std::string file = dir.file("bad.safetensors");
  EXPECT_THAT(
      error_of([&] { write_tiny_checkpoint(file, [](auto&, CheckpointInfo& i) { i.normalization.std = {0.0}; }); }),
      HasSubstr("[checkpoint] " + file + ": normalization std[0] is 0"));
  EXPECT_THAT(error_of([&] { write_tiny_checkpoint(file, [](auto&, CheckpointInfo& i) { i.class_names[9] = "0"; }); }),
              HasSubstr("class_names[9] '0' repeats"));
  EXPECT_FALSE(std::filesystem::exists(file));
}

// A checkpoint naming fewer classes than the model has outputs (a dataset of 3 classes in a
// 10-way head): predictions of the other outputs are named by number, not read past the list.
TEST(CheckpointLoad, ClassNamesCoverEveryOutput) {
  testing::TempDir dir;
  const std::string file = dir.file("three.safetensors");
  write_tiny_checkpoint(file, [](auto&, CheckpointInfo& i) { i.class_names = {"cat", "dog", "eel"}; });
  const LoadedModel m = load_model(file);
  ASSERT_EQ(m.class_names.size(), 10u);
  EXPECT_EQ(m.class_names[2], "eel");
  EXPECT_EQ(m.class_names[7], "7");
}

}  // namespace
}  // namespace vit::checkpoint
