// infer::Predictor, the handle every door wraps: what a model can do (classifier or not, pooling),
// input checks with the doors' messages, predict / embed equal to the session's, top-k.
#include "infer/predictor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "support/errors.h"
#include "support/files.h"
#include "support/similarity.h"
#include "support/tiny_checkpoint.h"
#include "support/variants.h"

namespace vit::infer {
namespace {

// The error fn throws contains `message`.
template <class Fn>
void expect_error(Fn fn, const std::string& message) {
  const std::string what = testing::error_of([&] { fn(); });
  EXPECT_NE(what.find(message), std::string::npos) << what << "\n  wanted: " << message;
}

LoadedModel loaded_from(const model::ViTConfig& c, uint64_t seed = 3) {
  LoadedModel m;
  m.model = std::make_unique<model::VisionTransformer>(c, std::make_shared<Generator>(seed));
  m.model->eval();
  for (int64_t k = 0; k < c.num_classes; ++k) m.class_names.push_back("class" + std::to_string(k));
  m.preprocess.mean.assign(static_cast<size_t>(c.in_channels), 0.5);
  m.preprocess.std.assign(static_cast<size_t>(c.in_channels), 0.5);
  return m;
}

model::ViTConfig variant(const std::string& name) {
  for (const model::ViTConfig& c : testing::descendant_variants()) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no variant " << name;
  return {};
}

Tensor images_for(const Predictor& p, int64_t batch) {
  Generator gen(11);
  return Tensor::randn(p.input_shape(batch), gen);
}

TEST(Predictor, AClassifierPredictsWhatTheSessionComputesAndRanksItsClasses) {
  const model::ViTConfig c = variant("dist_token");
  Predictor p(loaded_from(c));
  EXPECT_TRUE(p.has_classifier());
  EXPECT_EQ(p.num_classes(), c.num_classes);
  EXPECT_EQ(p.default_pool(), Pool::Cls);
  const Tensor x = images_for(p, 3);
  const Tensor logits = p.predict(x);
  ASSERT_EQ(logits.shape(), (Shape{3, c.num_classes}));
  InferenceSession session(*p.loaded().model);
  const Tensor expected = session.forward(x);
  for (int64_t i = 0; i < logits.numel(); ++i) EXPECT_EQ(logits.data<float>()[i], expected.data<float>()[i]) << i;
  // The batcher's door gives the same rows.
  const Tensor via_run = p.run({Output::Logits}, x);
  for (int64_t i = 0; i < logits.numel(); ++i) EXPECT_EQ(via_run.data<float>()[i], expected.data<float>()[i]) << i;
  const auto top = p.top_k(logits, 2);
  ASSERT_EQ(top.size(), 3u);
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_EQ(top[b].size(), 2u);
    EXPECT_GE(top[b][0].probability, top[b][1].probability);
    const float* row = logits.data<float>() + b * c.num_classes;
    for (int64_t k = 0; k < c.num_classes; ++k) EXPECT_LE(row[k], row[top[b][0].index]);
  }
  EXPECT_EQ(p.label(top[0][0].index), "class" + std::to_string(top[0][0].index));
  expect_error([&] { p.label(c.num_classes); }, "[predict] class index 5 is not one of the model's 5 classes");
}

TEST(Predictor, TopKRefusesNonFiniteLogitsAndMisshapenRows) {
  Predictor p(loaded_from(variant("dist_token")));
  Tensor logits = Tensor::zeros({2, 5});
  logits.data<float>()[7] = std::numeric_limits<float>::infinity();
  expect_error([&] { p.top_k(logits, 1); }, "[top_k] the logits contains NaN or infinity (element 7 of 10)");
  expect_error(
      [&] {
        p.top_k(Tensor::zeros({2, 4}), 1);
      },
      "[top_k] logits (2, 4) are not rows of the model's 5 classes");
  expect_error([&] { p.top_k(Tensor::zeros({2, 5}), 0); }, "[top_k] k must be positive, got 0");
}

TEST(Predictor, ProjectionsAndFeatureExtractorsAreNotClassifiers) {
  for (const char* name : {"projection", "no head"}) {
    const model::ViTConfig c = variant(name);
    Predictor p(loaded_from(c));
    EXPECT_FALSE(p.has_classifier()) << name;
    EXPECT_EQ(p.num_classes(), 0) << name;
    const std::string why =
        std::string(name) == "projection" ? "its head is CLIP's image projection" : "a feature extractor";
    expect_error([&] { p.predict(images_for(p, 1)); },
                 fmt::format("[predict] {} has no classifier head ({}): it gives embeddings, with embed", name, why));
    expect_error([&] { p.require_classifier("serve", "file.safetensors", "POST /v1/embed"); },
                 fmt::format("[serve] file.safetensors: {} has no classifier head ({}): POST /v1/embed", name, why));
    // Embeddings work, with the shapes embed_shape says.
    for (Pool pool : {Pool::Cls, Pool::Avg, Pool::Tokens}) {
      const Tensor e = p.embed(images_for(p, 2), pool);
      EXPECT_EQ(e.shape(), p.embed_shape(2, pool)) << name << " " << pool_name(pool);
    }
  }
  EXPECT_EQ(Predictor(loaded_from(variant("projection"))).embed_dim(), 5);  // CLIP: the projection's width
}

TEST(Predictor, PoolingFollowsTheModel) {
  Predictor avg(loaded_from(variant("avg")));
  EXPECT_EQ(avg.default_pool(), Pool::Avg);
  model::ViTConfig no_cls = variant("avg");
  no_cls.pool = "mean";  // timm's class_token=False
  Predictor without(loaded_from(no_cls));
  expect_error([&] { without.check_pool(Pool::Cls, "embed"); },
               "[embed] avg has no class token: pool it with avg (or take the tokens)");
  expect_error([&] { without.embed(images_for(without, 1), Pool::Cls); }, "has no class token");
  EXPECT_EQ(without.embed(images_for(without, 1), Pool::Avg).shape(), (Shape{1, 16}));
  EXPECT_EQ(parse_pool("tokens"), Pool::Tokens);
  expect_error([] { parse_pool("max", "serve"); }, "[serve] pool must be cls, avg or tokens, got 'max'");
  EXPECT_EQ(avg.embed_shape(4, Pool::Tokens), (Shape{4, avg.config().num_tokens(), 16}));
}

TEST(Predictor, InputsAreCheckedWithTheDoorsMessages) {
  Predictor p(loaded_from(variant("avg")));
  expect_error(
      [&] {
        p.check_input(Tensor::zeros({2, 10}), "predict", "x.npy");
      },
      "[predict] x.npy: input (2, 10) but the model takes (B, 2, 12, 12)");
  expect_error(
      [&] {
        p.check_input(Tensor::zeros({1, 3, 12, 12}), "serve", "");
      },
      "[serve] input (1, 3, 12, 12) but the model takes (B, 2, 12, 12)");
  Tensor nan = Tensor::zeros({1, 2, 12, 12});
  nan.data<float>()[5] = std::nanf("");
  expect_error([&] { p.check_input(nan, "serve", "the .npy body"); },
               "[serve] the .npy body: the input contains NaN or infinity (element 5 of 288)");
  std::vector<float> values(288, 0.0f);
  EXPECT_EQ(p.borrow_input(values.data(), 1, "predict").shape(), (Shape{1, 2, 12, 12}));
  expect_error(
      [&] {
        p.borrow_input(values.data(), Shape{2, 2, 12}, "predict");
      },
      "[predict] input (2, 2, 12) but the model takes (B, 2, 12, 12)");
  expect_error([&] { p.borrow_input(values.data(), -1, "predict"); }, "[predict] batch must be >= 0, got -1");
  expect_error([&] { p.borrow_input(nullptr, 1, "predict"); }, "[predict] the input pointer is null");
  EXPECT_EQ(p.borrow_input(nullptr, 0, "predict").numel(), 0);
}

TEST(Predictor, LoadsFilesAndAppliesPreprocessingOverrides) {
  testing::TempDir dir;
  testing::write_tiny_checkpoint(dir.file("tiny.safetensors"));
  LoadSettings o;
  o.mean = {0.25};
  o.std = {0.5};
  o.crop = 20;
  o.interpolation = Filter::Bicubic;
  Predictor p = Predictor::load(dir.file("tiny.safetensors"), o);
  EXPECT_EQ(p.loaded().preprocess.mean, std::vector<double>{0.25});
  EXPECT_EQ(p.loaded().preprocess.crop, 20);
  EXPECT_EQ(p.loaded().preprocess.filter, Filter::Bicubic);
  o.std = {0.5, 0.5};
  expect_error([&] { Predictor::load(dir.file("tiny.safetensors"), o); },
               "[preprocess] --std needs 1 value (the model takes grey images) (one value for all channels, "
               "or one per channel), got 2");
  o.std = {0.0};
  expect_error([&] { Predictor::load(dir.file("tiny.safetensors"), o); },
               "[preprocess] --std values must be positive, got 0");
}

// timm's forward_head(pre_logits=True) on an fc_norm (avg-pooled) model asked for its class token:
// fc_norm(cls), in the session and the graph alike (was the raw class token).
TEST(Predictor, TheClassTokenOfAnFcNormModelGoesThroughFcNorm) {
  const model::ViTConfig c = variant("avg");
  Predictor p(loaded_from(c));
  model::VisionTransformer& m = *p.loaded().model;
  ASSERT_TRUE(m.fc_norm != nullptr);
  const Tensor x = images_for(p, 2);
  NoGradGuard no_grad;
  const Variable tokens = m.forward_tokens(Variable(x));                   // (B, N, D)
  const Tensor expected = m.fc_norm->forward(tokens.select(1, 0)).data();  // (B, D)
  const Tensor graph = m.pool_tokens(tokens, model::PoolKind::Cls).data();
  const Tensor session = p.embed(x, Pool::Cls);
  ASSERT_EQ(session.shape(), expected.shape());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    EXPECT_EQ(graph.data<float>()[i], expected.data<float>()[i]) << i;
    EXPECT_NEAR(session.data<float>()[i], expected.data<float>()[i], 1e-5) << i;
  }
}

// --precision bf16: the Linear layers in bfloat16 (float32 accumulation), the rest float32: the
// logits stay within bf16's rounding of float32's (cosine >= 0.9999), embeddings too.
TEST(Predictor, Bf16LogitsFollowFloat32) {
  const model::ViTConfig c = variant("dist_token");
  Predictor fp32(loaded_from(c));
  Predictor bf16(loaded_from(c), Predictor::WeightPages::Keep, Precision::BF16);
  EXPECT_EQ(bf16.precision(), Precision::BF16);
  const Tensor x = images_for(fp32, 4);
  for (const auto& [a, b] : {std::pair{fp32.predict(x), bf16.predict(x)},
                             std::pair{fp32.embed(x, Pool::Tokens), bf16.embed(x, Pool::Tokens)}}) {
    ASSERT_EQ(a.shape(), b.shape());
    const testing::Similarity s = testing::similarity(a, b);
    EXPECT_GE(s.cosine, 0.9999);
    EXPECT_GT(s.worst, 0.0);  // bf16 really ran (float32 would be identical)
  }
  EXPECT_EQ(parse_precision("bfloat16"), Precision::BF16);
  expect_error([] { parse_precision("fp16", "predict"); }, "[predict] precision must be fp32 or bf16, got 'fp16'");
}

// A server's checkpoint rewritten or truncated on disk: with WeightPages::Own the predictor keeps
// serving what it loaded (no SIGBUS reading a truncated mapping, no mix of two models' weights).
TEST(Predictor, OwningItsWeightsItNeverReadsTheFileAgain) {
  testing::TempDir dir;
  const std::string path = dir.file("tiny.safetensors");
  testing::write_tiny_checkpoint(path);
  Predictor p = Predictor::load(path, {}, Predictor::WeightPages::Own);
  p.prepare();
  const Tensor x = images_for(p, 2);
  const Tensor before = p.predict(x);
  // Another model of the same size written over the file in place, then the file truncated.
  testing::write_tiny_checkpoint(dir.file("other.safetensors"), [](model::VisionTransformer& m, auto&) {
    for (auto& [name, v] : m.named_parameters()) v.data().fill_(0.25);
  });
  const std::vector<uint8_t> other = testing::read_bytes(dir.file("other.safetensors"));
  {
    FILE* f = std::fopen(path.c_str(), "r+b");  // in place: the same inode, as a deploy's cp does
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(other.data(), 1, other.size(), f), other.size());
    std::fclose(f);
  }
  const Tensor after_rewrite = p.predict(x);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  const Tensor after_truncate = p.predict(x);
  for (int64_t i = 0; i < before.numel(); ++i) {
    EXPECT_EQ(after_rewrite.data<float>()[i], before.data<float>()[i]) << i;
    EXPECT_EQ(after_truncate.data<float>()[i], before.data<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace vit::infer
