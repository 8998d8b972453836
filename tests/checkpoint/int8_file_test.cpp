// Int8 models in a checkpoint file (checkpoint/int8_format.h): the tiny int8 model of
// tests/golden/int8/ (quantized by infer::quantize_linears) saved and loaded back with the same
// logits, through infer::load_model and the checkpoint reader; every bad int8 file refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/int8_format.h"
#include "infer/inference.h"
#include "infer/load_model.h"
#include "infer/quantize.h"
#include "io/safetensors.h"
#include "support/files.h"

namespace vit::checkpoint {
namespace {

using infer::InferenceSession;
using infer::load_model;
using infer::LoadedModel;
using infer::quantize_linears;

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/int8/";

LoadedModel load_tiny(const std::string& path = kDir + "tiny_vit.safetensors") {
  infer::LoadSettings o;
  o.num_heads = 4;
  return load_model(path, o);
}

TEST(Int8File, SavesAndLoadsWithTheSameLogits) {
  testing::TempDir dir;
  LoadedModel m = load_tiny();
  quantize_linears(*m.model);
  const std::string path = dir.file("int8.safetensors");
  save_checkpoint(path, *m.model, infer::checkpoint_info(m));  // as vit quantize saves it
  const io::WeightsFile file = io::load_safetensors(path);
  EXPECT_EQ(file.get("blocks.0.mlp.fc1.weight").dtype(), DType::I8);
  EXPECT_EQ(file.get("blocks.0.mlp.fc1.weight_scale").dtype(), DType::F32);
  EXPECT_EQ(file.get("patch_embed.proj.weight").dtype(), DType::F32);
  EXPECT_TRUE(file.metadata.count("quantization"));

  LoadedModel back = load_model(path);
  EXPECT_EQ(back.layout, "vit");
  EXPECT_TRUE(is_quantized(*back.model));
  EXPECT_EQ(back.preprocess.resize, m.preprocess.resize);  // timm's transform, not ours
  EXPECT_EQ(back.preprocess.crop, m.preprocess.crop);
  const Tensor x = io::load_safetensors(kDir + "reference.safetensors").get("input");
  InferenceSession a(*m.model), b(*back.model, InferenceSession::WeightPages::Release);
  const auto la = a.forward(x).to_vector(), lb = b.forward(x).to_vector();
  EXPECT_EQ(la, lb);
  // And through the checkpoint reader (vit eval, vit info).
  const auto model = model_from_checkpoint(load_checkpoint(path));
  InferenceSession c(*model);
  EXPECT_EQ(c.forward(x).to_vector(), la);
  // Quantizing it again is refused.
  EXPECT_THROW(quantize_linears(*back.model), Error);
}

// The default scheme is 8-bit (vit-int8-2); 7-bit files (vit-int8-1, --bits 7, every file written
// before issue 30) keep loading, each Linear told its range.
TEST(Int8File, TheFileSaysItsScheme) {
  testing::TempDir dir;
  const Tensor x = io::load_safetensors(kDir + "reference.safetensors").get("input");
  for (int bits : {8, 7}) {
    LoadedModel m = load_tiny();
    quantize_linears(*m.model, bits);
    const std::string path = dir.file("int8_" + std::to_string(bits) + ".safetensors");
    save_checkpoint(path, *m.model, infer::checkpoint_info(m));
    const std::string meta = io::load_safetensors(path).metadata.at("quantization");
    EXPECT_NE(meta.find(bits == 8 ? "\"vit-int8-2\"" : "\"vit-int8-1\""), std::string::npos) << meta;
    EXPECT_EQ(checkpoint::quantization_bits(meta, path), bits);
    LoadedModel back = load_model(path);
    EXPECT_EQ(back.model->head->weight_bits, bits);
    InferenceSession a(*m.model), b(*back.model);
    EXPECT_EQ(a.forward(x).to_vector(), b.forward(x).to_vector());
  }
  LoadedModel m = load_tiny();
  EXPECT_THROW(quantize_linears(*m.model, 6), Error);
}

// ---- bad files ----

// A valid int8 file, then one edit of its tensors or metadata, saved with a new checksum (an edit
// the checksum cannot catch: the checks by name must).
class BadInt8File : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadedModel m = load_tiny();
    quantize_linears(*m.model);
    const std::string path = dir.file("good.safetensors");
    save_checkpoint(path, *m.model, infer::checkpoint_info(m));
    const io::WeightsFile f = io::load_safetensors(path);
    for (const auto& [name, t] : f.tensors) tensors.emplace_back(name, t.contiguous());
    for (const auto& [k, v] : f.metadata) {
      if (k != io::kChecksumKey) metadata[k] = v;
    }
  }
  // Saves the (edited) tensors and metadata; returns the error message of loading it ("" if none).
  std::string load_error(bool checksum = true) {
    const std::string path = dir.file("bad.safetensors");
    io::save_safetensors(path, tensors, metadata, checksum);
    try {
      load_model(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  Tensor& tensor(const std::string& name) {
    for (auto& [n, t] : tensors) {
      if (n == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

TEST_F(BadInt8File, TheUneditedCopyLoads) { EXPECT_EQ(load_error(), ""); }

// Every int8 file was written with a checksum (they came later): one without it was edited, and
// is refused before its scales (here a finite, positive 1e30) are believed.
TEST_F(BadInt8File, WithoutItsChecksum) {
  const std::string unedited = load_error(/*checksum=*/false);
  EXPECT_NE(unedited.find("int8 model without its 'checksum'"), std::string::npos) << unedited;
  tensor("head.weight_scale").data<float>()[0] = 1e30f;
  const std::string scaled = load_error(/*checksum=*/false);
  EXPECT_NE(scaled.find("int8 model without its 'checksum'"), std::string::npos) << scaled;
  EXPECT_THROW(load_checkpoint(dir.file("bad.safetensors")), Error);
}

TEST_F(BadInt8File, ValueOutsideTheSevenBitRange) {
  tensor("blocks.1.mlp.fc2.weight").data<int8_t>()[5] = -128;
  const std::string e = load_error();
  EXPECT_NE(e.find("blocks.1.mlp.fc2.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("-128"), std::string::npos) << e;
}

// The fixture's file is 8-bit; labelled 7-bit, its values beyond 63 are refused.
TEST_F(BadInt8File, EightBitValuesInASevenBitFile) {
  std::string& meta = metadata["quantization"];
  meta.replace(meta.find("vit-int8-2"), 10, "vit-int8-1");
  const std::string e = load_error();
  EXPECT_NE(e.find("outside [-63, 63] (7-bit weights)"), std::string::npos) << e;
}

TEST_F(BadInt8File, ScaleWithNaNOrZero) {
  for (float bad : {std::nanf(""), 0.0f, -1.0f}) {
    Tensor& s = tensor("blocks.0.attn.qkv.weight_scale");
    const float keep = s.data<float>()[3];
    s.data<float>()[3] = bad;
    const std::string e = load_error();
    EXPECT_NE(e.find("blocks.0.attn.qkv.weight_scale"), std::string::npos) << bad << ": " << e;
    s.data<float>()[3] = keep;
  }
}

TEST_F(BadInt8File, ScaleOfTheWrongShape) {
  tensor("head.weight_scale") = Tensor::ones({11});
  const std::string e = load_error();
  EXPECT_NE(e.find("head.weight_scale"), std::string::npos) << e;
  EXPECT_NE(e.find("(11,)"), std::string::npos) << e;
}

TEST_F(BadInt8File, MissingScale) {
  std::erase_if(tensors, [](const auto& p) { return p.first == "head.weight_scale"; });
  const std::string e = load_error();
  EXPECT_NE(e.find("'head.weight' has no scale"), std::string::npos) << e;
}

TEST_F(BadInt8File, Int8WithoutMetadata) {
  metadata.erase("quantization");
  const std::string e = load_error();
  EXPECT_NE(e.find("int8"), std::string::npos) << e;
}

TEST_F(BadInt8File, ListedTensorThatIsFloat) {
  tensor("head.weight") = Tensor::ones({10, 48});
  const std::string e = load_error();
  EXPECT_NE(e.find("head.weight"), std::string::npos) << e;
}

TEST_F(BadInt8File, UnknownScheme) {
  metadata["quantization"] = R"({"scheme": "q4_0", "tensors": ["head.weight"]})";
  const std::string e = load_error();
  EXPECT_NE(e.find("q4_0"), std::string::npos) << e;
}

TEST_F(BadInt8File, MetadataThatIsNotJson) {
  metadata["quantization"] = "{not json";
  const std::string e = load_error();
  EXPECT_NE(e.find("quantization"), std::string::npos) << e;
}

// An I8 tensor whose byte length does not match its shape: the safetensors reader names it.
TEST_F(BadInt8File, ByteLengthThatDoesNotMatchTheShape) {
  const std::string path = dir.file("good.safetensors");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"blocks.0.attn.qkv.weight\":{\"dtype\":\"I8\",\"shape\":[144,48]";
  const auto at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, key.size(), "\"blocks.0.attn.qkv.weight\":{\"dtype\":\"I8\",\"shape\":[144,47]");
  const std::string bad = dir.file("short.safetensors");
  std::ofstream(bad, std::ios::binary) << bytes;
  try {
    load_model(bad);
    FAIL() << "loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blocks.0.attn.qkv.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace vit::checkpoint
