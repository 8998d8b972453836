// Fine-tuning against PyTorch (tools/golden/make_golden_finetune.py): a DeiT-shaped timm file (class and
// distillation tokens) at another resolution with new zero heads and layer decay, and a
// DINOv2-shaped one (registers, LayerScale, no head) shrunk to a smaller grid on grey images with
// a new head, layer decay and a head learning rate. The adaptations of train/init_from.h, then
// three float32 AdamW steps: every step's logits, loss and gradient, and the final weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "autograd/ops.h"
#include "model/vision_transformer.h"
#include "optim/optimizer.h"
#include "support/golden.h"
#include "train/init_from.h"

namespace vit {
namespace {

using testing::golden;

void check_case(const std::string& name) {
  const io::WeightsFile f = testing::load_golden("finetune/" + name + ".safetensors");
  const auto config = nlohmann::json::parse(f.metadata.at("config"));
  const int64_t size = config["image_size"], channels = config["channels"], classes = config["classes"];
  const double lr = config["lr"], head_scale = config["head_scale"];
  train::TrainConfig c;
  c.init = std::string(VIT_GOLDEN_DIR) + "/variants/" + config["init"].get<std::string>();
  c.model.image_size = size;
  c.model.num_heads = config["heads"];  // width 32 is no standard width: the head count is given
  c.given_model_fields = {"image_size", "num_heads"};
  c.lr = lr;
  c.layer_decay = config["layer_decay"];
  c.head_lr = head_scale != 1.0 ? lr * head_scale : 0.0;
  train::InitSource src = train::read_init(c);
  data::Dataset data;  // what fit_init_to_data reads: the images' channels and the class names
  data.channels = channels;
  data.height = data.width = size;
  data.source = "golden";
  for (int64_t k = 0; k < classes; ++k) data.class_names.push_back("new class " + std::to_string(k));
  EXPECT_TRUE(train::fit_init_to_data(c, src, data).empty());  // other classes: a fresh head
  ASSERT_EQ(c.model.num_classes, classes);
  ASSERT_EQ(c.model.in_channels, channels);
  model::VisionTransformer m(c.model, std::make_shared<Generator>(7));
  train::load_init_weights(m, src, c);
  const optim::NamedParameters params = m.named_parameters();
  optim::AdamW opt(params, lr, config["weight_decay"].get<double>());
  opt.set_lr_scales(train::lr_scales(params, c));
  const Tensor x = golden(f, "input", DType::F32);
  const Tensor targets = testing::golden_targets(f, "targets");
  const double smoothing = config["label_smoothing"];
  for (int step = 0; step < config["steps"].get<int>(); ++step) {
    SCOPED_TRACE(name + " step " + std::to_string(step));
    opt.zero_grad();
    const Variable logits = m(Variable(x));
    Variable loss = cross_entropy(logits, targets, smoothing);
    loss.backward();
    const std::string k = std::to_string(step);
    EXPECT_CLOSE(logits.data(), golden(f, "logits." + k, DType::F32), testing::kGoldenFloatStepsTol);
    EXPECT_CLOSE(loss.data(), golden(f, "loss." + k, DType::F32), testing::kGoldenFloatStepsTol);
    for (const auto& [pname, p] : params) {
      ASSERT_TRUE(p.grad().defined()) << pname;
      EXPECT_TRUE(testing::all_close(p.grad(), golden(f, "grad." + k + "." + pname, DType::F32),
                                     testing::kGoldenFloatStepsTol, "grad." + k + "." + pname));
    }
    opt.step();
  }
  // The key third of a qkv bias has a zero gradient in exact arithmetic (softmax ignores a shift
  // of all of a query's scores), so AdamW's steps there follow rounding noise on either side:
  // compare the query and value thirds.
  for (const auto& [pname, p] : params) {
    const Tensor expected = golden(f, "final." + pname, DType::F32);
    if (pname.size() > 13 && pname.compare(pname.size() - 13, 13, "attn.qkv.bias") == 0) {
      const int64_t a = p.data().size(0) / 3;
      for (const int64_t from : {int64_t{0}, 2 * a}) {
        EXPECT_TRUE(testing::all_close(p.data().slice(0, from, from + a).contiguous(),
                                       expected.slice(0, from, from + a).contiguous(), testing::kFinetuneFinalTol,
                                       "final." + pname + (from == 0 ? " (q)" : " (v)")));
      }
      continue;
    }
    EXPECT_TRUE(testing::all_close(p.data(), expected, testing::kFinetuneFinalTol, "final." + pname));
  }
}

TEST(FinetuneGolden, DeitAtAnotherResolutionWithNewHeadsAndLayerDecay) { check_case("deit"); }

TEST(FinetuneGolden, Dinov2RegistersOnGreyImagesWithANewHeadLayerDecayAndAHeadLr) { check_case("dinov2"); }

// The parameter groups: timm's layer ids and the multipliers they give.
TEST(FinetuneGroups, LayerIdsAndScalesFollowBeitAndTimm) {
  EXPECT_EQ(train::layer_id("cls_token", 4), 0);
  EXPECT_EQ(train::layer_id("reg_token", 4), 0);
  EXPECT_EQ(train::layer_id("pos_embed", 4), 0);
  EXPECT_EQ(train::layer_id("patch_embed.proj.weight", 4), 0);
  EXPECT_EQ(train::layer_id("stem.0.weight", 4), 0);
  EXPECT_EQ(train::layer_id("blocks.0.norm1.weight", 4), 1);
  EXPECT_EQ(train::layer_id("blocks.3.mlp.fc2.bias", 4), 4);
  EXPECT_EQ(train::layer_id("blocks.11.attn.qkv.weight", 12), 12);
  EXPECT_EQ(train::layer_id("norm.weight", 4), 5);
  EXPECT_EQ(train::layer_id("head.weight", 4), 5);
  train::TrainConfig c;
  c.model.depth = 2;
  c.lr = 1e-3;
  optim::NamedParameters params;
  for (const char* n : {"pos_embed", "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc1.bias", "norm.bias", "head.weight"})
    params.emplace_back(n, Variable(Tensor::zeros({2, 2}), true));
  EXPECT_TRUE(train::lr_scales(params, c).empty());  // no decay, no head lr: all 1
  c.layer_decay = 0.5;
  const std::vector<double> decayed = {0.125, 0.25, 0.5, 1.0, 1.0};
  std::vector<double> got = train::lr_scales(params, c);
  ASSERT_EQ(got.size(), decayed.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], decayed[i]) << params[i].first;
  c.head_lr = 5e-3;  // the head at 5x
  got = train::lr_scales(params, c);
  ASSERT_EQ(got.size(), decayed.size());
  EXPECT_DOUBLE_EQ(got[3], 1.0);
  EXPECT_DOUBLE_EQ(got[4], 5.0);
}

}  // namespace
}  // namespace vit
