// Training golden tests for ViT's descendants (tools/golden/make_golden_variants.py, float64 PyTorch):
//  - LayerScale + 2 register tokens + DeiT's distillation token (no_embed_class): both heads'
//    logits, DeiT's hard-distillation loss 0.5 CE(head(x_cls), labels) + 0.5 CE(head_dist(x_dist),
//    teacher labels), and every parameter's gradient;
//  - the ViT notebook's VisionTransformer as its author meant it (vit_notebook's options):
//    logits (tanh head), cross-entropy loss and every gradient.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/vision_transformer.h"
#include "support/golden.h"
#include "train/distillation.h"

namespace vit {
namespace {

using testing::golden;

std::unique_ptr<model::VisionTransformer> build(const model::ViTConfig& c, const io::WeightsFile& f) {
  auto m = std::make_unique<model::VisionTransformer>(c, std::make_shared<Generator>(0));
  nn::StateDict state;
  for (const auto& [name, _] : m->named_parameters()) state.emplace_back(name, golden(f, name, DType::F32));
  m->load_state_dict(state);
  return m;
}

void expect_gradients(const model::VisionTransformer& m, const io::WeightsFile& f) {
  size_t checked = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(
        testing::all_close(p.grad(), golden(f, "grad." + name, DType::F64), testing::kGoldenFloatTol, "grad." + name));
    ++checked;
  }
  size_t in_file = 0;
  for (const auto& [name, _] : f.tensors) in_file += name.rfind("grad.", 0) == 0;
  EXPECT_EQ(checked, in_file) << "every gradient of the reference is one of ours";
}

TEST(VariantsGolden, LayerScaleRegistersAndDistillationTrainAsDeiT) {
  const auto f = testing::load_golden("variants/train_ls_reg_dist.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(f.metadata.at("config"));
  model::ViTConfig c;
  c.name = "ls_reg_dist";
  c.image_size = meta["image_size"];
  c.patch_size = meta["patch_size"];
  c.in_channels = 3;
  c.num_classes = meta["num_classes"];
  c.dim = meta["dim"];
  c.depth = meta["depth"];
  c.num_heads = meta["num_heads"];
  c.mlp_dim = meta["mlp_dim"];
  c.reg_tokens = meta["reg_tokens"];
  c.dist_token = meta["dist_token"];
  c.no_embed_class = meta["no_embed_class"];
  c.layer_scale = 1e-5;  // initial value only: the file's gammas replace it
  c.eps = meta["eps_timm"];
  auto m = build(c, f);
  ASSERT_NE(m->head_dist, nullptr);
  ASSERT_EQ(m->reg_token.shape(), (Shape{1, 2, c.dim}));

  const Tensor labels = testing::golden_targets(f, "labels");
  const Tensor teacher_labels = testing::golden_targets(f, "teacher_labels");
  // A teacher whose top class is the reference's teacher label: one-hot logits.
  const int64_t B = labels.numel(), K = c.num_classes;
  Tensor teacher_logits = Tensor::zeros({B, K});
  for (int64_t i = 0; i < B; ++i) teacher_logits.data<float>()[i * K + teacher_labels.data<int64_t>()[i]] = 1.0f;

  const double alpha = meta["alpha"];
  auto [cls, dist] = m->forward_distilled(Variable(golden(f, "input", DType::F32)));
  train::DistillationSettings hard;
  hard.alpha = alpha;
  Variable loss = cross_entropy(cls, labels) * (1.0 - alpha) + train::distillation_term(dist, teacher_logits, hard, B);
  loss.backward();
  EXPECT_CLOSE(cls.data(), golden(f, "logits_cls", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(dist.data(), golden(f, "logits_dist", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(loss.data(), golden(f, "loss", DType::F64), testing::kGoldenFloatTol);
  expect_gradients(*m, f);
  // Inference averages the two heads.
  NoGradGuard no_grad;
  EXPECT_CLOSE((*m)(Variable(golden(f, "input", DType::F32))).data(), golden(f, "logits", DType::F64),
               testing::kGoldenFloatTol);
}

TEST(VariantsGolden, SoftDistillationIsDeiTsKlTerm) {
  // alpha tau^2 sum KL(p_t || p_s) / (B K), against the closed form in double.
  const Tensor student = Tensor::from_data(std::vector<double>{0.5, -1.0, 2.0, 0.0, 0.3, -0.2}, {2, 3});
  const Tensor teacher = Tensor::from_data(std::vector<double>{1.0, 0.0, -1.0, 2.0, 2.0, 0.5}, {2, 3});
  train::DistillationSettings soft;
  soft.type = "soft";
  soft.alpha = 0.7;
  soft.tau = 2.0;
  const Variable s(student.to(DType::F32), true);
  Variable term = train::distillation_term(s, teacher.to(DType::F32), soft, 4);
  double kl = 0.0;
  const auto sv = student.to_vector(), tv = teacher.to_vector();
  for (int row = 0; row < 2; ++row) {
    double zs = 0.0, zt = 0.0;
    for (int k = 0; k < 3; ++k) zs += std::exp(sv[row * 3 + k] / 2.0), zt += std::exp(tv[row * 3 + k] / 2.0);
    for (int k = 0; k < 3; ++k) {
      const double pt = std::exp(tv[row * 3 + k] / 2.0) / zt, ps = std::exp(sv[row * 3 + k] / 2.0) / zs;
      kl += pt * (std::log(pt) - std::log(ps));
    }
  }
  EXPECT_NEAR(term.item(), 0.7 * 4.0 * kl / (4.0 * 3.0), testing::kFloatSumTol);
  term.backward();
  EXPECT_TRUE(s.grad().defined());
  train::DistillationSettings bad;
  bad.type = "medium";
  EXPECT_THROW(train::distillation_term(s, teacher.to(DType::F32), bad, 2), Error);
  EXPECT_THROW(train::distillation_term(s, Tensor::zeros({2, 4}), soft, 2), Error);
}

TEST(VariantsGolden, TheNotebooksVisionTransformerTrainsAsTranscribed) {
  const auto f = testing::load_golden("variants/notebook.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(f.metadata.at("config"));
  model::ViTConfig c = model::preset("vit_notebook");
  c.image_size = meta["image_size"];
  c.patch_size = meta["patch_size"];
  c.in_channels = 3;
  c.num_classes = meta["num_classes"];
  c.dim = meta["dim"];
  c.depth = meta["depth"];
  c.num_heads = meta["num_heads"];
  c.dim_head = meta["head_dim"];  // each head projects to the full width
  c.mlp_dim = meta["mlp_dim"];
  c.eps = meta["eps_timm"];
  ASSERT_TRUE(c.norm_tokens && c.head_tanh && !c.final_norm && c.mlp_layers == 1);
  auto m = build(c, f);
  EXPECT_EQ(m->blocks->named_parameters().front().second.shape(), (Shape{17, 16}));  // LayerNorm((N+1, dim))
  Variable logits = (*m)(Variable(golden(f, "input", DType::F32)));
  Variable loss = cross_entropy(logits, testing::golden_targets(f, "labels"));
  loss.backward();
  EXPECT_CLOSE(logits.data(), golden(f, "logits", DType::F64), testing::kGoldenFloatTol);
  EXPECT_CLOSE(loss.data(), golden(f, "loss", DType::F64), testing::kGoldenFloatTol);
  expect_gradients(*m, f);
}

}  // namespace
}  // namespace vit
