// Int8 models against the PyTorch reference of the scheme (tools/quantize_reference.py, files in
// tests/golden/int8/): quantized weights and scales bit-exact; for every Linear, on the
// reference's own input, the activation rows, zero points and int32 accumulators bit-exact and the
// output within 1e-5 of its largest value (both kernel paths); the whole int8 forward close to the
// reference's; the file round trip; and every bad int8 file refused by name.
#include "infer/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "infer/checkpoint.h"
#include "infer/inference.h"
#include "infer/pretrained.h"
#include "io/safetensors.h"
#include "kernels/cpu_features.h"
#include "kernels/int8_gemm.h"
#include "nn/layers.h"
#include "support/files.h"

namespace vit::infer {
namespace {

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/int8/";

LoadedModel load_tiny(const std::string& path = kDir + "tiny_vit.safetensors") {
  LoadOptions o;
  o.num_heads = 4;
  return load_model(path, o);
}

std::vector<std::pair<std::string, nn::Linear*>> linears(model::VisionTransformer& m) {
  std::vector<std::pair<std::string, nn::Linear*>> out;
  for (size_t b = 0; b < m.blocks->named_children().size(); ++b) {
    auto* block = dynamic_cast<nn::EncoderBlock*>(m.blocks->named_children()[b].second.get());
    const std::string pre = "blocks." + std::to_string(b) + ".";
    out.emplace_back(pre + "attn.qkv", block->attn->qkv.get());
    out.emplace_back(pre + "attn.proj", block->attn->proj.get());
    out.emplace_back(pre + "mlp.fc1", block->mlp->fc1.get());
    out.emplace_back(pre + "mlp.fc2", block->mlp->fc2.get());
  }
  out.emplace_back("head", m.head.get());
  return out;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

TEST(Int8Golden, WeightsQuantizeBitExactly) {
  LoadedModel m = load_tiny();
  const io::SafetensorsFile ref = io::load_safetensors(kDir + "reference.safetensors");
  const QuantizeSummary s = quantize_linears(*m.model);
  EXPECT_EQ(s.tensors, 9);  // 2 blocks x 4 + the head
  for (auto& [name, l] : linears(*m.model)) {
    ASSERT_TRUE(l->quantized()) << name;
    const Tensor& q = l->weight.data();
    const Tensor& want = ref.get(name + ".q");
    ASSERT_EQ(q.shape(), want.shape()) << name;
    EXPECT_EQ(std::memcmp(q.data<int8_t>(), want.data<int8_t>(), static_cast<size_t>(q.numel())), 0) << name;
    const Tensor& scale = ref.get(name + ".scale");
    for (int64_t i = 0; i < scale.numel(); ++i) {
      ASSERT_EQ(l->weight_scale.data<float>()[i], scale.data<float>()[i]) << name << " scale " << i;
    }
  }
  EXPECT_THROW(quantize_linears(*m.model), Error);  // already quantized
}

TEST(Int8Golden, EveryLayerMatchesOnTheReferenceInput) {
  LoadedModel m = load_tiny();
  quantize_linears(*m.model);
  const io::SafetensorsFile ref = io::load_safetensors(kDir + "reference.safetensors");
  for (auto& [name, l] : linears(*m.model)) {
    const auto w = kernels::Int8Matrix::from_quantized(l->weight.data().data<int8_t>(), l->weight_scale.data<float>(),
                                                       l->out_features, l->in_features);
    const Tensor& x = ref.get(name + ".input");
    const int64_t M = x.size(0), K = x.size(1), N = l->out_features;
    const Tensor qa = ref.get(name + ".qa"), acc = ref.get(name + ".acc"), zp = ref.get(name + ".zero_point");
    const Tensor row_scale = ref.get(name + ".row_scale"), out = ref.get(name + ".output");
    // The activation bytes of each row, by the plain definition.
    for (int64_t r = 0; r < M; ++r) {
      std::vector<uint8_t> q(static_cast<size_t>(K));
      const kernels::RowQuantization rq = kernels::quantize_row(x.data<float>() + r * K, K, q.data());
      ASSERT_EQ(rq.scale, row_scale.data<float>()[r]) << name << " row " << r;
      ASSERT_EQ(rq.zero_point, zp.data<int64_t>()[r]) << name << " row " << r;
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(q[k], qa.data<int64_t>()[r * K + k]) << name << " " << r << "," << k;
    }
    // Every path on this machine, by capping the ISA: the best (AVX-512 VNNI where it runs), AVX2, plain.
    for (kernels::Isa path : {kernels::Isa::Avx512Vnni, kernels::Isa::Avx2, kernels::Isa::Scalar}) {
      const kernels::ScopedIsaLimit limit(path);
      std::vector<int32_t> got(static_cast<size_t>(M * N));
      std::vector<kernels::RowQuantization> rows(static_cast<size_t>(M));
      kernels::int8_accumulators(x.data<float>(), M, K, K, w, got.data(), rows.data());
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(got[i], acc.data<int64_t>()[i]) << name << " acc " << i;
      std::vector<float> y(static_cast<size_t>(M * N));
      kernels::linear_int8(x.data<float>(), M, K, K, w, l->bias.data().data<float>(), y.data(), N,
                           kernels::Epilogue::Store);
      const double top = max_abs(out);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_NEAR(y[i], out.data<double>()[i], 1e-5 * top) << name << " output " << i;
      }
    }
  }
}

// The whole forward: float32 LayerNorm/GELU/softmax of C++ and PyTorch differ in the last bits,
// and a value on a rounding boundary can then quantize one step apart: close, not bit-exact.
TEST(Int8Golden, TheInt8ForwardMatchesTheReference) {
  LoadedModel m = load_tiny();
  quantize_linears(*m.model);
  const io::SafetensorsFile ref = io::load_safetensors(kDir + "reference.safetensors");
  InferenceSession session(*m.model);
  const Tensor logits = session.forward(ref.get("input"));
  const Tensor want = ref.get("logits");
  const double top = max_abs(want);
  const auto a = logits.to_vector(), b = want.to_vector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * top) << i;
  // The graph path (attention maps, --graph) dequantises the weights instead: close to both.
  NoGradGuard no_grad;
  const auto g = (*m.model)(Variable(ref.get("input"))).data().to_vector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(g[i], b[i], 0.05 * top) << i;
}

TEST(Int8File, SavesAndLoadsWithTheSameLogits) {
  testing::TempDir dir;
  LoadedModel m = load_tiny();
  quantize_linears(*m.model);
  const std::string path = dir.file("int8.safetensors");
  save_checkpoint(path, *m.model, checkpoint_info(m));  // as vit quantize saves it
  const io::SafetensorsFile file = io::load_safetensors(path);
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

// ---- bad files ----

// A valid int8 file, then one edit of its tensors or metadata, saved without a checksum.
class BadInt8File : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadedModel m = load_tiny();
    quantize_linears(*m.model);
    const std::string path = dir.file("good.safetensors");
    save_checkpoint(path, *m.model, checkpoint_info(m));
    const io::SafetensorsFile f = io::load_safetensors(path);
    for (const auto& [name, t] : f.tensors) tensors.emplace_back(name, t.contiguous());
    for (const auto& [k, v] : f.metadata) {
      if (k != io::kChecksumKey) metadata[k] = v;
    }
  }
  // Saves the (edited) tensors and metadata; returns the error message of loading it ("" if none).
  std::string load_error() {
    const std::string path = dir.file("bad.safetensors");
    io::save_safetensors(path, tensors, metadata, /*checksum=*/false);
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

TEST_F(BadInt8File, ValueOutsideTheSevenBitRange) {
  tensor("blocks.1.mlp.fc2.weight").data<int8_t>()[5] = -128;
  const std::string e = load_error();
  EXPECT_NE(e.find("blocks.1.mlp.fc2.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("-128"), std::string::npos) << e;
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

TEST(Int8Quantize, RefusesAllZeroAndNonFiniteWeights) {
  {
    LoadedModel m = load_tiny();
    auto* block = dynamic_cast<nn::EncoderBlock*>(m.model->blocks->named_children()[1].second.get());
    block->mlp->fc1->weight.data().fill_(0.0);
    try {
      quantize_linears(*m.model);
      FAIL() << "quantized";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'blocks.1.mlp.fc1.weight' is all zeros"), std::string::npos) << e.what();
    }
  }
  {
    LoadedModel m = load_tiny();
    m.model->head->weight.data().set({2, 3}, std::numeric_limits<double>::infinity());
    try {
      quantize_linears(*m.model);
      FAIL() << "quantized";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'head.weight' holds inf at (2, 3)"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vit::infer
