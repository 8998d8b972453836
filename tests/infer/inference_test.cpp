// The graph-free inference path must give the graph's numbers (eval mode) for every variant
// of the architecture, at batch sizes that exercise the attention work split.
#include "infer/inference.h"

#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "support/tolerances.h"

namespace vit::model {
namespace {

void expect_matches_graph(const ViTConfig& config, int64_t batch, uint64_t seed) {
  auto gen = std::make_shared<Generator>(seed);
  VisionTransformer model(config, gen);
  // Non-trivial biases, LayerNorm affines and cls token (timm's init leaves them 0/1).
  for (auto& [name, p] : model.named_parameters()) {
    if (name.find("bias") != std::string::npos || name.find("norm") != std::string::npos || name == "cls_token") {
      Tensor t = p.data();
      const Tensor noise = Tensor::randn(t.shape(), *gen);
      const float base = name.find("weight") != std::string::npos ? 1.0f : 0.0f;
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + 0.1f * noise.data<float>()[i];
    }
  }
  model.eval();
  const Tensor images = Tensor::randn({batch, config.in_channels, config.image_size, config.image_size}, *gen);
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = model(Variable(images)).data();
  }
  infer::InferenceSession session(model);
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second call reuses the arena
    const Tensor got = session.forward(images);
    ASSERT_EQ(got.shape(), expected.shape());
    const std::vector<double> g = got.to_vector(), e = expected.to_vector();
    double scale = 0;
    for (double v : e) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], e[i], testing::kInferenceLogitTol * std::max(1.0, scale))
          << config.name << " batch " << batch << " logit " << i;
    }
  }
}

TEST(InferenceSession, MatchesTheGraphForEveryVariant) {
  ViTConfig c = preset("vit_digits");  // mean pooling, no cls token
  expect_matches_graph(c, 1, 1);
  expect_matches_graph(c, 5, 2);
  c.pool = "cls";
  c.name = "cls";
  expect_matches_graph(c, 3, 3);
  c.qkv_bias = false;
  c.representation_size = 20;
  c.num_heads = 1;
  c.mlp_dim = 33;
  c.name = "no_qkv_bias_prelogits_1head";
  expect_matches_graph(c, 2, 4);
  ViTConfig odd = preset("vit_cifar");
  odd.image_size = 35;
  odd.patch_size = 7;  // 25 patches + cls = 26 tokens
  odd.in_channels = 3;
  odd.name = "odd";
  expect_matches_graph(odd, 7, 5);
}

TEST(InferenceSession, RefusesBadInputsAndHandlesAnEmptyBatch) {
  VisionTransformer model(preset("vit_digits"), std::make_shared<Generator>(0));
  model.eval();
  infer::InferenceSession session(model);
  EXPECT_THROW(session.forward(Tensor::zeros({1, 3, 28, 28})), Error);
  EXPECT_THROW(session.forward(Tensor::zeros({28, 28})), Error);
  EXPECT_EQ(session.forward(Tensor::zeros({0, 1, 28, 28})).shape(), (Shape{0, 10}));
  VisionTransformer f64(preset("vit_digits"), std::make_shared<Generator>(0));
  f64.to(DType::F64);
  EXPECT_FALSE(infer::InferenceSession::supports(f64));
  EXPECT_THROW(infer::InferenceSession{f64}, Error);
}

}  // namespace
}  // namespace vit::model
