// llm.c-style end-to-end check: a tiny ViT built in PyTorch (tools/golden/make_golden_vit.py) with fixed
// weights; we reproduce its logits, loss, every parameter gradient, and the losses and final
// weights of 5 AdamW steps and 5 SGD steps, in float32.
#include <gtest/gtest.h>

#include "model/vision_transformer.h"
#include "optim/optimizer.h"
#include "support/golden.h"

namespace vit {
namespace {

using testing::golden;

model::ViTConfig tiny_config(const io::WeightsFile& f) {
  model::ViTConfig c;
  c.name = "tiny_golden";
  c.image_size = std::stoll(f.metadata.at("image_size"));
  c.patch_size = std::stoll(f.metadata.at("patch_size"));
  c.in_channels = std::stoll(f.metadata.at("in_channels"));
  c.num_classes = std::stoll(f.metadata.at("num_classes"));
  c.dim = std::stoll(f.metadata.at("dim"));
  c.depth = std::stoll(f.metadata.at("depth"));
  c.num_heads = std::stoll(f.metadata.at("num_heads"));
  c.mlp_ratio = std::stod(f.metadata.at("mlp_ratio"));
  c.eps = std::stod(f.metadata.at("eps"));
  return c;
}

std::unique_ptr<model::VisionTransformer> load_tiny(const io::WeightsFile& f) {
  auto m = std::make_unique<model::VisionTransformer>(tiny_config(f), std::make_shared<Generator>(0));
  nn::StateDict state;
  for (const auto& [name, _] : m->named_parameters()) state.emplace_back(name, golden(f, name, DType::F32));
  m->load_state_dict(state);
  return m;
}

TEST(TinyViTGolden, ParameterNamesAndOrderMatchTimm) {
  const auto f = testing::load_golden("tiny_vit.safetensors");
  auto m = load_tiny(f);
  std::vector<std::string> ours, theirs;
  for (const auto& [name, _] : m->named_parameters()) ours.push_back(name);
  for (const auto& [name, _] : f.tensors) {
    if (name.find('.') == std::string::npos
            ? (name == "cls_token" || name == "pos_embed")
            : (name.rfind("grad.", 0) != 0 && name.rfind("adamw.", 0) != 0 && name.rfind("sgd.", 0) != 0)) {
      theirs.push_back(name);
    }
  }
  EXPECT_EQ(ours, theirs);
}

TEST(TinyViTGolden, LogitsLossAndEveryGradient) {
  const auto f = testing::load_golden("tiny_vit.safetensors");
  auto m = load_tiny(f);
  Variable logits = (*m)(Variable(golden(f, "x", DType::F32)));
  Variable loss = cross_entropy(logits, testing::golden_targets(f, "targets"));
  loss.backward();
  EXPECT_CLOSE(logits.data(), golden(f, "logits", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(loss.data(), golden(f, "loss", DType::F64), testing::kGoldenFloatTol);
  for (const auto& [name, p] : m->named_parameters()) {
    EXPECT_TRUE(
        testing::all_close(p.grad(), golden(f, "grad." + name, DType::F64), testing::kGoldenFloatTol, "grad." + name));
  }
}

void run_steps(const std::string& which) {
  const auto f = testing::load_golden("tiny_vit.safetensors");
  auto m = load_tiny(f);
  const Tensor x = golden(f, "x", DType::F32);
  const Tensor targets = testing::golden_targets(f, "targets");
  std::unique_ptr<optim::Optimizer> opt;
  if (which == "adamw") {
    opt = std::make_unique<optim::AdamW>(m->named_parameters(), std::stod(f.metadata.at("lr")),
                                         std::stod(f.metadata.at("weight_decay")), 0.9, 0.999,
                                         std::stod(f.metadata.at("adam_eps")));
  } else {
    opt = std::make_unique<optim::SGD>(m->named_parameters(), std::stod(f.metadata.at("sgd_lr")),
                                       std::stod(f.metadata.at("sgd_momentum")), 0.0);
  }
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    opt->zero_grad();
    Variable loss = cross_entropy((*m)(Variable(x)), targets);
    losses.push_back(loss.item());
    loss.backward();
    opt->step();
  }
  EXPECT_CLOSE(Tensor::from_data(losses, {5}), golden(f, which + ".losses", DType::F64), testing::kGoldenFloatStepsTol);
  const int64_t D = m->config().dim;
  for (const auto& [name, p] : m->named_parameters()) {
    const Tensor expected = golden(f, which + ".final." + name, DType::F64);
    const bool qkv_bias = name.size() > 13 && name.compare(name.size() - 13, 13, "attn.qkv.bias") == 0;
    if (!(qkv_bias && which == "adamw")) {
      EXPECT_TRUE(testing::all_close(p.data(), expected, testing::kGoldenFloatStepsTol, which + ".final." + name));
      continue;
    }
    // The key bias (qkv.bias[D:2D]) has an exactly-zero gradient: it adds the same q.b_k to every
    // score of a softmax row. Both frameworks feed Adam rounding noise there, which Adam rescales
    // to steps of up to lr, so those entries are undetermined; q and v biases must still match.
    for (int64_t part : {0, 2}) {
      EXPECT_TRUE(testing::all_close(p.data().slice(0, part * D, (part + 1) * D),
                                     expected.slice(0, part * D, (part + 1) * D), testing::kGoldenFloatStepsTol,
                                     which + ".final." + name + (part == 0 ? "[q]" : "[v]")));
    }
    const Tensor initial = golden(f, name, DType::F64).slice(0, D, 2 * D);
    const double lr = std::stod(f.metadata.at("lr"));
    const std::vector<double> now = p.data().slice(0, D, 2 * D).to_vector(), before = initial.to_vector();
    for (size_t i = 0; i < now.size(); ++i)
      EXPECT_LE(std::fabs(now[i] - before[i]), 5 * lr * testing::kAdamStepBoundFactor) << name << "[k] " << i;
  }
}

TEST(TinyViTGolden, FiveAdamWStepsWithDecoupledDecayGroups) { run_steps("adamw"); }
TEST(TinyViTGolden, FiveSgdMomentumSteps) { run_steps("sgd"); }

}  // namespace
}  // namespace vit
