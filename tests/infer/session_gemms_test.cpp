// The GEMMs a session's forward runs (infer/session_gemms.h): shapes, rows, epilogues and call
// counts as the stages make them (a plain ViT, LayerScale, a tanh-GELU MLP, a distilled model), the
// kernel each runs at every precision (fp32 packed or BLAS, bf16, int8), and their multiply-adds
// equal to the architecture's count of the Linear layers.
#include "infer/session_gemms.h"

#include <gtest/gtest.h>

#include "infer/inference.h"
#include "infer/quantize.h"
#include "kernels/cpu_features.h"
#include "model/architecture.h"
#include "model/vision_transformer.h"

namespace vit::infer {
namespace {

model::ViTConfig small_config() {
  model::ViTConfig c;
  c.image_size = 28;
  c.patch_size = 7;  // 16 patches, 17 tokens
  c.in_channels = 1;
  c.num_classes = 10;
  c.dim = 16;
  c.depth = 3;
  c.num_heads = 2;
  c.mlp_ratio = 2.0;
  return c;
}

struct Row {
  std::string name;
  int64_t rows, in, out;
  std::string epilogue;
  int64_t calls;
};

void expect_rows(const std::vector<SessionGemm>& gemms, const std::vector<Row>& rows) {
  ASSERT_EQ(gemms.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].name);
    EXPECT_EQ(gemms[i].name, rows[i].name);
    EXPECT_EQ(gemms[i].rows, rows[i].rows);
    EXPECT_EQ(gemms[i].weights->in, rows[i].in);
    EXPECT_EQ(gemms[i].weights->out, rows[i].out);
    EXPECT_EQ(epilogue_name(gemms[i].epilogue), rows[i].epilogue);
    EXPECT_EQ(gemms[i].calls, rows[i].calls);
  }
}

TEST(SessionGemms, APlainVitsLinearsWithTheirRowsAndEpilogues) {
  const model::ViTConfig c = small_config();
  auto gen = std::make_shared<Generator>(1);
  model::VisionTransformer m(c, gen);
  m.eval();
  const InferenceSession session(m);
  const int64_t B = 3, N = 17;
  const auto gemms = session_gemms(session.weights(), c, B);
  expect_rows(gemms, {{"patch_embed", B * 16, 49, 16, "store", 1},
                      {"qkv", B * N, 16, 48, "store", 3},
                      {"proj", B * N, 16, 16, "residual", 3},
                      {"fc1", B * N, 16, 32, "gelu", 3},
                      {"fc2", B * N, 32, 16, "residual", 3},
                      {"head", B, 16, 10, "store", 1}});
  // Each call's weights, in forward order: the blocks' own.
  for (const SessionGemm& g : gemms) {
    ASSERT_EQ(static_cast<int64_t>(g.instances.size()), g.calls) << g.name;
    EXPECT_EQ(g.instances.front(), g.weights) << g.name;
  }
  for (size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(gemms[1].instances[b], &session.weights().layers[b].qkv);
    EXPECT_EQ(gemms[4].instances[b], &session.weights().layers[b].fc2);
  }
  // Their multiply-adds are the architecture's, less attention's q k^T and probabilities @ v.
  const model::ComputeCost cost = model::macs_per_image(c);
  double flops = 0;
  for (const SessionGemm& g : gemms) flops += static_cast<double>(g.calls) * g.flops();
  const double linear_macs = static_cast<double>(cost.total() - c.depth * 2 * N * N * c.attn_dim());
  EXPECT_DOUBLE_EQ(flops, 2.0 * linear_macs * B);
  for (const SessionGemm& g : gemms) {
    EXPECT_STREQ(linear_kernel(*g.weights), kernels::packed_gemm_supported() ? "fp32" : "fp32-blas");
  }
}

TEST(SessionGemms, LayerScaleStoresTheBranchAndTanhGeluIsFused) {
  model::ViTConfig c = small_config();
  c.layer_scale = 0.1;
  c.act = "gelu_tanh";
  auto gen = std::make_shared<Generator>(2);
  model::VisionTransformer m(c, gen);
  m.eval();
  const InferenceSession session(m);
  const auto gemms = session_gemms(session.weights(), c, 1);
  expect_rows(gemms, {{"patch_embed", 16, 49, 16, "store", 1},
                      {"qkv", 17, 16, 48, "store", 3},
                      {"proj", 17, 16, 16, "store", 3},
                      {"fc1", 17, 16, 32, "gelu_tanh", 3},
                      {"fc2", 17, 32, 16, "store", 3},
                      {"head", 1, 16, 10, "store", 1}});
}

TEST(SessionGemms, ADistilledModelRunsBothHeads) {
  model::ViTConfig c = small_config();
  c.dist_token = true;  // class and distillation tokens: 18 tokens
  auto gen = std::make_shared<Generator>(3);
  model::VisionTransformer m(c, gen);
  m.eval();
  const InferenceSession session(m);
  const auto gemms = session_gemms(session.weights(), c, 2);
  ASSERT_EQ(gemms.size(), 7u);
  EXPECT_EQ(gemms[1].rows, 2 * 18);
  EXPECT_EQ(gemms[5].name, "head");
  EXPECT_EQ(gemms[6].name, "head_dist");
  EXPECT_EQ(gemms[6].rows, 2);
}

TEST(SessionGemms, TheKernelFollowsThePrecision) {
  const model::ViTConfig c = small_config();
  auto gen = std::make_shared<Generator>(4);
  model::VisionTransformer m(c, gen);
  m.eval();
  {
    const InferenceSession bf16(m, InferenceSession::WeightPages::Keep, Precision::BF16);
    for (const SessionGemm& g : session_gemms(bf16.weights(), c, 1)) EXPECT_STREQ(linear_kernel(*g.weights), "bf16");
  }
  {
    const kernels::ScopedIsaLimit scalar(kernels::Isa::Scalar);  // float weights are then not packed
    const InferenceSession plain(m);
    for (const SessionGemm& g : session_gemms(plain.weights(), c, 1)) {
      EXPECT_STREQ(linear_kernel(*g.weights), "fp32-blas");
    }
  }
  quantize_linears(m);  // the block Linears and the head; the patch projection stays float32
  const InferenceSession int8(m);
  for (const SessionGemm& g : session_gemms(int8.weights(), c, 1)) {
    EXPECT_STREQ(linear_kernel(*g.weights),
                 g.name == "patch_embed" ? (kernels::packed_gemm_supported() ? "fp32" : "fp32-blas") : "int8")
        << g.name;
  }
}

}  // namespace
}  // namespace vit::infer
