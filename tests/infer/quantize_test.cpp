// Int8 models against the PyTorch reference of the schemes (tools/golden/quantize_reference.py, files in
// tests/golden/int8/: reference.safetensors for 7-bit weights, reference_8bit.safetensors for
// 8-bit ones, each test over both): quantized weights and scales bit-exact; for every Linear, on the
// reference's own input, the activation rows, zero points and int32 accumulators bit-exact and the
// output within 1e-5 of its largest value (every kernel path: VNNI, AVX2 forced, plain); the whole int8 forward close
// to the reference's; quantizing refuses all-zero and non-finite weights. (The int8 file round trip and the bad int8
// files: tests/checkpoint/int8_file_test.cpp.)
#include "infer/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "infer/inference.h"
#include "infer/load_model.h"
#include "io/safetensors.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/int8_gemm.h"
#include "nn/layers.h"
#include "support/files.h"

namespace vit::infer {
namespace {

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/int8/";

LoadedModel load_tiny(const std::string& path = kDir + "tiny_vit.safetensors") {
  LoadSettings o;
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

// The two schemes and their reference files.
struct Scheme {
  int bits;
  const char* reference;
};
constexpr Scheme kSchemes[] = {{7, "reference.safetensors"}, {8, "reference_8bit.safetensors"}};

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

TEST(Int8Golden, WeightsQuantizeBitExactly) {
  for (const Scheme& scheme : kSchemes) {
    SCOPED_TRACE(scheme.reference);
    LoadedModel m = load_tiny();
    const io::WeightsFile ref = io::load_safetensors(kDir + scheme.reference);
    const QuantizeSummary s = quantize_linears(*m.model, scheme.bits);
    EXPECT_EQ(s.bits, scheme.bits);
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
}

TEST(Int8Golden, EveryLayerMatchesOnTheReferenceInput) {
  for (const Scheme& scheme : kSchemes) {
    SCOPED_TRACE(scheme.reference);
    LoadedModel m = load_tiny();
    quantize_linears(*m.model, scheme.bits);
    const io::WeightsFile ref = io::load_safetensors(kDir + scheme.reference);
    for (auto& [name, l] : linears(*m.model)) {
      const auto w = kernels::Int8Matrix::from_quantized(l->weight.data().data<int8_t>(), l->weight_scale.data<float>(),
                                                         l->out_features, l->in_features, scheme.bits);
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
}

// The whole forward: float32 LayerNorm/GELU/softmax of C++ and PyTorch differ in the last bits,
// and a value on a rounding boundary can then quantize one step apart: close, not bit-exact.
TEST(Int8Golden, TheInt8ForwardMatchesTheReference) {
  for (const Scheme& scheme : kSchemes) {
    SCOPED_TRACE(scheme.reference);
    LoadedModel m = load_tiny();
    quantize_linears(*m.model, scheme.bits);
    const io::WeightsFile ref = io::load_safetensors(kDir + scheme.reference);
    InferenceSession session(*m.model);
    const Tensor logits = session.forward(ref.get("input"));
    const Tensor want = ref.get("logits");
    const double top = max_abs(want);
    const auto a = logits.to_vector(), b = want.to_vector();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * top) << i;
    {  // The AVX2 path forced (an 8-bit model on a CPU without VNNI: the signed-shift kernel).
      const kernels::ScopedIsaLimit avx2(kernels::Isa::Avx2);
      InferenceSession forced(*m.model);
      const auto f = forced.forward(ref.get("input")).to_vector();
      for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], b[i], 1e-4 * top) << "AVX2 " << i;
    }
    // The graph path (attention maps, --graph) dequantises the weights instead: close to both.
    NoGradGuard no_grad;
    const auto g = (*m.model)(Variable(ref.get("input"))).data().to_vector();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(g[i], b[i], 0.05 * top) << i;
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
