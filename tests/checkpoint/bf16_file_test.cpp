// bfloat16 weights in a checkpoint file (checkpoint/bf16_format.h, `vit quantize --dtype bf16`):
// the tiny model of tests/golden/int8/ saved with its Linear and convolution weights as BF16, loaded
// back widened exactly; bf16 inference of the file gives the float file's bf16 logits bit for bit;
// the file is about half the size; every inconsistent file refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "checkpoint/bf16_format.h"
#include "checkpoint/checkpoint.h"
#include "infer/inference.h"
#include "infer/load_model.h"
#include "infer/quantize.h"
#include "io/safetensors.h"
#include "kernels/gemm/bf16_gemm.h"
#include "support/files.h"

namespace vit::checkpoint {
namespace {

using infer::InferenceSession;
using infer::load_model;
using infer::LoadedModel;
using infer::Precision;

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/int8/";

LoadedModel load_tiny() {
  infer::LoadSettings o;
  o.num_heads = 4;
  return load_model(kDir + "tiny_vit.safetensors", o);
}

float rounded(float x) { return kernels::from_bf16(kernels::to_bf16(x)); }

TEST(Bf16File, StoresTheLinearAndConvolutionWeightsAsBf16AndLoadsThemWidenedExactly) {
  testing::TempDir dir;
  LoadedModel m = load_tiny();
  const std::string path = dir.file("bf16.safetensors");
  save_checkpoint(path, *m.model, infer::checkpoint_info(m), {}, WeightStorage::BF16);  // as vit quantize does
  const io::WeightsFile file = io::load_safetensors(path);
  std::map<std::string, std::string> stored;
  for (const auto& span : file.spans) stored[span.name] = span.dtype;
  const std::vector<std::string> names = bf16_weight_names(*m.model);
  const std::set<std::string> bf16(names.begin(), names.end());
  EXPECT_TRUE(bf16.count("patch_embed.proj.weight"));
  EXPECT_TRUE(bf16.count("blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(bf16.count("head.weight"));
  EXPECT_FALSE(bf16.count("head.bias"));
  EXPECT_FALSE(bf16.count("pos_embed"));
  for (const auto& [name, p] : m.model->named_parameters()) {
    EXPECT_EQ(stored.at(name), bf16.count(name) ? "BF16" : "F32") << name;
  }
  const std::string meta = file.metadata.at(kStorageKey);
  EXPECT_NE(meta.find("\"vit-bf16-1\""), std::string::npos) << meta;
  EXPECT_EQ(bf16_storage_names(meta), names);

  LoadedModel back = load_model(path);
  EXPECT_EQ(back.recorded.storage_json, meta);
  const auto loaded = back.model->named_parameters();
  for (const auto& [name, p] : m.model->named_parameters()) {
    const Tensor& b =
        std::find_if(loaded.begin(), loaded.end(), [&](const auto& l) { return l.first == name; })->second.data();
    ASSERT_EQ(b.dtype(), DType::F32) << name;
    const Tensor a = p.data().contiguous();
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float want = bf16.count(name) ? rounded(a.data<float>()[i]) : a.data<float>()[i];
      ASSERT_EQ(b.data<float>()[i], want) << name << " [" << i << "]";
    }
  }
  // Writing it again as float32 drops the storage entry (what is written, not what was read).
  save_checkpoint(dir.file("f32.safetensors"), *back.model, infer::checkpoint_info(back));
  EXPECT_FALSE(io::load_safetensors(dir.file("f32.safetensors")).metadata.count(kStorageKey));
}

// The point of the format: --precision bf16 of the file runs what --precision bf16 of the float
// model runs (each weight rounds to itself), and float32 runs the widened weights.
TEST(Bf16File, Bf16InferenceOfTheFileIsBf16InferenceOfTheFloatModel) {
  testing::TempDir dir;
  LoadedModel m = load_tiny();
  const std::string path = dir.file("bf16.safetensors");
  save_checkpoint(path, *m.model, infer::checkpoint_info(m), {}, WeightStorage::BF16);
  const Tensor x = io::load_safetensors(kDir + "reference.safetensors").get("input");
  LoadedModel back = load_model(path);
  const auto from_float = InferenceSession(*m.model, InferenceSession::WeightPages::Keep, Precision::BF16).forward(x);
  const auto from_file = InferenceSession(*back.model, InferenceSession::WeightPages::Keep, Precision::BF16).forward(x);
  EXPECT_EQ(from_file.to_vector(), from_float.to_vector());
  const auto reader = model_from_checkpoint(load_checkpoint(path));  // vit eval's path
  EXPECT_EQ(InferenceSession(*reader, InferenceSession::WeightPages::Keep, Precision::BF16).forward(x).to_vector(),
            from_float.to_vector());
  // float32 of the file: the float model with those weights rounded by hand.
  for (const std::string& name : bf16_weight_names(*m.model)) {
    for (const auto& [n, p] : m.model->named_parameters()) {
      if (n != name) continue;
      float* w = p.data().data<float>();
      for (int64_t i = 0; i < p.data().numel(); ++i) w[i] = rounded(w[i]);
    }
  }
  EXPECT_EQ(InferenceSession(*back.model).forward(x).to_vector(), InferenceSession(*m.model).forward(x).to_vector());
}

TEST(Bf16File, IsAboutHalfTheFloatFile) {
  testing::TempDir dir;
  model::VisionTransformer model(model::preset("vit_digits"), std::make_shared<Generator>(1));
  CheckpointInfo info;
  info.model = model.config();
  info.normalization = {{0.5}, {0.25}};
  save_checkpoint(dir.file("f32.safetensors"), model, info);
  save_checkpoint(dir.file("bf16.safetensors"), model, info, {}, WeightStorage::BF16);
  const auto f32 = static_cast<double>(std::filesystem::file_size(dir.file("f32.safetensors")));
  const auto bf16 = static_cast<double>(std::filesystem::file_size(dir.file("bf16.safetensors")));
  EXPECT_GT(bf16 / f32, 0.48) << bf16 << " / " << f32;
  EXPECT_LT(bf16 / f32, 0.53) << bf16 << " / " << f32;
}

TEST(Bf16File, OnlyAFloatModelAloneIsStoredAsBf16) {
  testing::TempDir dir;
  LoadedModel m = load_tiny();
  TrainingState state;
  state.optimizer = "adamw";
  state.optimizer_state = {{"x", Tensor::zeros({2})}};
  EXPECT_THROW(
      save_checkpoint(dir.file("a.safetensors"), *m.model, infer::checkpoint_info(m), state, WeightStorage::BF16),
      Error);
  infer::quantize_linears(*m.model);
  try {
    save_checkpoint(dir.file("b.safetensors"), *m.model, infer::checkpoint_info(m), {}, WeightStorage::BF16);
    FAIL() << "an int8 model stored as bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[checkpoint]"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.safetensors")));
}

// ---- bad files ----

// A valid bf16 file re-saved after one edit of its tensors' storage or metadata (with a new
// checksum: the checks by name must catch it).
class BadBf16File : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadedModel m = load_tiny();
    const std::string path = dir.file("good.safetensors");
    save_checkpoint(path, *m.model, infer::checkpoint_info(m), {}, WeightStorage::BF16);
    const io::WeightsFile f = io::load_safetensors(path);
    for (const auto& [name, t] : f.tensors) tensors.emplace_back(name, t.contiguous());
    for (const auto& [k, v] : f.metadata) {
      if (k != io::kChecksumKey) metadata[k] = v;
    }
    for (const auto& span : f.spans) {
      if (span.dtype == "BF16") bf16.insert(span.name);
    }
  }
  std::string load_error() {
    const std::string path = dir.file("bad.safetensors");
    io::Bf16Bits bits;
    for (const auto& [name, t] : tensors) {
      if (!bf16.count(name)) continue;
      for (int64_t i = 0; i < t.numel(); ++i) bits[name].push_back(kernels::to_bf16(t.data<float>()[i]));
    }
    io::save_safetensors(path, tensors, metadata, true, bits);
    try {
      load_model(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  std::set<std::string> bf16;  // stored as BF16
};

TEST_F(BadBf16File, TheUneditedCopyLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(BadBf16File, ListedTensorStoredAsFloat) {
  bf16.erase("blocks.0.mlp.fc1.weight");
  const std::string e = load_error();
  EXPECT_NE(e.find("[checkpoint] "), std::string::npos) << e;
  EXPECT_NE(e.find("'blocks.0.mlp.fc1.weight', stored as F32"), std::string::npos) << e;
}

TEST_F(BadBf16File, Bf16TensorNotListed) {
  bf16.insert("pos_embed");
  const std::string e = load_error();
  EXPECT_NE(e.find("tensor 'pos_embed' is stored as BF16 but metadata 'storage' does not list it"), std::string::npos)
      << e;
}

TEST_F(BadBf16File, ListedTensorTheFileDoesNotHold) {
  std::string& meta = metadata[kStorageKey];
  meta.replace(meta.find("head.weight"), 11, "head.weigh2");
  const std::string e = load_error();
  EXPECT_NE(e.find("lists 'head.weigh2', which the file does not hold"), std::string::npos) << e;
}

TEST_F(BadBf16File, UnknownScheme) {
  std::string& meta = metadata[kStorageKey];
  meta.replace(meta.find("vit-bf16-1"), 10, "vit-fp8-01");
  const std::string e = load_error();
  EXPECT_NE(e.find("scheme is 'vit-fp8-01'; this vit reads 'vit-bf16-1'"), std::string::npos) << e;
}

TEST_F(BadBf16File, MetadataThatIsNotJson) {
  metadata[kStorageKey] = "{not json";
  const std::string e = load_error();
  EXPECT_NE(e.find("metadata 'storage' is not"), std::string::npos) << e;
}

// A vit checkpoint with BF16 weights but no "storage" entry (written by another tool) loads as
// before: widened to float32.
TEST_F(BadBf16File, Bf16WithoutTheEntryStillLoads) {
  metadata.erase(kStorageKey);
  EXPECT_EQ(load_error(), "");
}

}  // namespace
}  // namespace vit::checkpoint
