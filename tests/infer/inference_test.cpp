// The graph-free inference path must give the graph's numbers (eval mode) for every variant
// of the architecture, at batch sizes that exercise the attention work split.
#include "infer/inference.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/variable.h"
#include "checkpoint/checkpoint.h"
#include "infer/load_model.h"
#include "kernels/cpu_features.h"
#include "support/files.h"
#include "support/similarity.h"
#include "support/tolerances.h"
#include "support/variants.h"

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
  // A hybrid's BatchNorms: affines and running statistics away from 1 / 0 (the folding reads them all).
  for (auto& [name, p] : model.named_parameters()) {
    if (name.find(".bn") == std::string::npos && name.find("downsample.bn") == std::string::npos) continue;
    Tensor t = p.data();
    const Tensor noise = Tensor::randn(t.shape(), *gen);
    const float base = name.ends_with(".weight") ? 1.0f : 0.0f;
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + 0.2f * noise.data<float>()[i];
  }
  for (auto& [name, b] : model.named_buffers()) {
    Tensor t = b.data();
    const Tensor noise = Tensor::randn(t.shape(), *gen);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = name.ends_with("running_var") ? 1.0f + 0.5f * std::abs(noise.data<float>()[i])
                                                         : 0.2f * noise.data<float>()[i];
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
  ViTConfig hybrid = preset("vit_digits");  // a convolutional stem before the patch embedding
  hybrid.stem_layers = 1;
  hybrid.stem_channels = 8;
  hybrid.name = "stem 1x8";
  expect_matches_graph(hybrid, 3, 6);
  hybrid.stem_layers = 2;
  hybrid.stem_channels = 5;
  hybrid.pool = "cls";
  hybrid.name = "stem 2x5 cls";
  expect_matches_graph(hybrid, 4, 7);
  odd.stem_layers = 1;  // 3 input channels, a 35x35 image
  odd.stem_channels = 4;
  odd.name = "odd stem";
  expect_matches_graph(odd, 2, 8);
  // A hybrid's backbone, BatchNorm folded into its convolutions: three stages to a 7x7 map read
  // as 1x1 patches, and two stages to 14x14 read as 7x7 patches (3 input channels, cls pooling).
  ViTConfig resnet = preset("vit_digits");
  resnet.conv_stages = 3;
  resnet.conv_channels = 4;
  resnet.conv_blocks = 2;
  resnet.patch_size = 4;
  resnet.name = "hybrid 3 stages";
  expect_matches_graph(resnet, 3, 9);
  resnet.conv_stages = 2;
  resnet.conv_blocks = 1;
  resnet.patch_size = 14;
  resnet.in_channels = 3;
  resnet.pool = "cls";
  resnet.name = "hybrid 2 stages, 7x7 patches";
  expect_matches_graph(resnet, 2, 10);
  resnet.conv_stem_stride = 2;  // 28 -> 14 in the stem, 7 in the second stage: 1x1 patches of the 7x7 map
  resnet.patch_size = 4;
  resnet.conv_blocks = 2;
  resnet.name = "hybrid, stride-2 stem";
  expect_matches_graph(resnet, 3, 11);
  // Every ISA path the CPU has: the folded convolutions run on the direct convolution's
  // micro-kernel of that level (kernels/conv/conv_micro.h).
  for (kernels::Isa isa : {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512}) {
    if (isa > kernels::cpu_isa()) continue;
    const kernels::ScopedIsaLimit limit(isa);
    resnet.name = fmt::format("hybrid, stride-2 stem, {}", kernels::isa_name(isa));
    expect_matches_graph(resnet, 2, 12);
  }
}

void expect_close(const Tensor& got, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(got.shape(), expected.shape()) << what;
  const std::vector<double> g = got.to_vector(), e = expected.to_vector();
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], e[i], testing::kInferenceLogitTol * std::max(1.0, scale)) << what << " value " << i;
  }
}

// A hybrid's session in bfloat16 runs its folded convolutions as im2row + the bf16 GEMM, in float32
// on the direct convolution: the two follow each other to bf16's rounding (cosine >= 0.9999) and
// differ (both paths ran).
TEST(InferenceSession, HybridBf16ConvolutionsFollowTheDirectFloat32Ones) {
  ViTConfig c = preset("vit_hybrid_fashion");
  c.in_channels = 3;  // the stem's planes made channels-last for the direct path
  auto gen = std::make_shared<Generator>(21);
  VisionTransformer model(c, gen);
  for (auto& [name, t] : model.named_state()) {  // BatchNorm statistics and affines away from 0 / 1
    if (name.find("bn") == std::string::npos) continue;
    Tensor d = t.data();
    for (int64_t i = 0; i < d.numel(); ++i) d.data<float>()[i] = 0.5f + 0.5f * gen->uniform_float();
  }
  model.eval();
  const Tensor images = Tensor::randn({3, c.in_channels, c.image_size, c.image_size}, *gen);
  infer::InferenceSession fp32(model), bf16(model, infer::InferenceSession::WeightPages::Keep, infer::Precision::BF16);
  NoGradGuard no_grad;
  const Tensor graph = model(Variable(images)).data();
  const Tensor a = fp32.forward(images), b = bf16.forward(images);
  expect_close(a, graph, "float32 session vs graph");
  ASSERT_EQ(a.shape(), b.shape());
  const testing::Similarity s = testing::similarity(a, b);
  EXPECT_GE(s.cosine, 0.9999);
  EXPECT_GT(s.worst, 0.0);
}

// Every descendant option: logits, pooled features, tokens and both poolings of `vit embed`
// from the session equal the graph's, with every parameter away from its initial value (tokens,
// LayerScale gammas, norms: timm's init leaves many at 0, 1 or 1e-6).
TEST(InferenceSession, MatchesTheGraphForEveryDescendant) {
  uint64_t seed = 10;
  for (const ViTConfig& c : testing::descendant_variants()) {
    SCOPED_TRACE(c.name);
    auto gen = std::make_shared<Generator>(++seed);
    VisionTransformer model(c, gen);
    for (auto& [name, p] : model.named_parameters()) {
      if (name.size() > 7 && name.ends_with(".weight") && name.find("norm") == std::string::npos) continue;
      Tensor t = p.data();
      const Tensor noise = Tensor::randn(t.shape(), *gen);
      const bool one = name.ends_with("norm1.weight") || name.ends_with("norm2.weight") || name.ends_with("gamma") ||
                       (name.find("norm") != std::string::npos && name.ends_with("weight"));
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (one ? 1.0f : 0.0f) + 0.3f * noise.data<float>()[i];
    }
    model.eval();
    const Tensor images = Tensor::randn({3, c.in_channels, c.image_size, c.image_size}, *gen);
    infer::InferenceSession session(model);
    NoGradGuard no_grad;
    const Variable x(images);
    if (c.has_head()) expect_close(session.forward(images), model(x).data(), "logits");
    expect_close(session.forward_features(images), model.forward_features(x).data(), "features");
    const Variable tokens = model.forward_tokens(x);
    expect_close(session.embed(images, infer::Pool::Tokens), tokens.data(), "tokens");
    for (const std::string pool : {"cls", "avg"}) {
      if (pool == "cls" && !c.class_token()) {
        EXPECT_THROW(session.embed(images, infer::parse_pool(pool)), Error);
        continue;
      }
      Variable e = model.pool_tokens(tokens, pool == "cls" ? model::PoolKind::Cls : model::PoolKind::Avg);
      if (model.pre_logits) e = model.pre_logits->forward(e);
      if (c.projection) e = model.head->forward(e);
      expect_close(session.embed(images, infer::parse_pool(pool)), e.data(), "embed " + pool);
    }
  }
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

// A memory-mapped checkpoint: the session packs every weight; with WeightPages::Release it drops
// the mapped copy (MADV_DONTNEED) and the model still reads its weights afterwards (the pages
// come back from the file), so the session and the graph agree before and after. A model on the
// heap is never touched by Release.
TEST(InferenceSession, ReleasingMappedWeightsLosesNothing) {
  ViTConfig c;
  c.image_size = 32;
  c.patch_size = 8;
  c.in_channels = 3;
  c.num_classes = 10;
  c.dim = 64;  // fc1's weight is 128 x 64 floats = 8 pages
  c.depth = 2;
  c.num_heads = 4;
  c.mlp_ratio = 2.0;
  auto gen = std::make_shared<Generator>(5);
  VisionTransformer heap_model(c, gen);
  heap_model.eval();
  testing::TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  checkpoint::CheckpointInfo info;
  info.model = c;
  info.normalization = {{0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}};
  checkpoint::save_checkpoint(path, heap_model, info);
  infer::LoadedModel loaded = infer::load_model(path);
  VisionTransformer& mapped = *loaded.model;
  mapped.eval();
  ASSERT_TRUE(mapped.blocks->named_parameters().front().second.data().is_file_mapped());
  const Tensor images = Tensor::randn({2, 3, 32, 32}, *gen);
  Tensor graph;
  {
    NoGradGuard no_grad;
    graph = heap_model(Variable(images)).data();
  }
  const Tensor kept = infer::InferenceSession(mapped).forward(images);
  const Tensor released =
      infer::InferenceSession(mapped, infer::InferenceSession::WeightPages::Release).forward(images);
  const Tensor heap =
      infer::InferenceSession(heap_model, infer::InferenceSession::WeightPages::Release).forward(images);
  Tensor graph_after;
  {
    NoGradGuard no_grad;
    graph_after = mapped(Variable(images)).data();
  }
  EXPECT_EQ(kept.to_vector(), released.to_vector());
  EXPECT_EQ(kept.to_vector(), heap.to_vector());
  const std::vector<double> g = graph.to_vector(), a = graph_after.to_vector(), k = kept.to_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(a[i], g[i]) << "the mapped model's weights changed at logit " << i;
    EXPECT_NEAR(k[i], g[i], testing::kInferenceLogitTol * std::max(1.0, std::abs(g[i])));
  }
  // The heap model's weights are intact too (Release never drops memory that is not a file's).
  Tensor heap_after;
  {
    NoGradGuard no_grad;
    heap_after = heap_model(Variable(images)).data();
  }
  EXPECT_EQ(heap_after.to_vector(), g);
}

}  // namespace
}  // namespace vit::model
