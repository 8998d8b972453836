// Mixed-precision training of a whole ViT (nn::set_matmul_precision, MatmulPrecision::BF16): the
// setting reaches every Linear and convolution (a stem's included), and one training step's loss
// and every parameter's gradient differ from float32 only at bf16 level; the parameters and their
// gradients stay float32.
#include <gtest/gtest.h>

#include "model/vision_transformer.h"
#include "nn/layers.h"
#include "support/golden.h"

namespace vit::model {
namespace {

using testing::kBf16MinDifference;
using testing::kBf16VsFloatTol;

ViTConfig tiny() {
  ViTConfig c;
  c.image_size = 16;
  c.patch_size = 4;
  c.in_channels = 3;
  c.num_classes = 10;
  c.dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  c.stem_layers = 1;
  c.stem_channels = 8;
  return c;
}

// The loss of one batch and every parameter's gradient (a fresh model with seed 0 each time).
std::pair<double, nn::StateDict> step(MatmulPrecision precision) {
  VisionTransformer model(tiny(), std::make_shared<Generator>(0));
  nn::set_matmul_precision(model, precision);
  Generator gen(7);
  const Tensor images = Tensor::randn({6, 3, 16, 16}, gen);
  const Tensor targets = Tensor::from_data(std::vector<int64_t>{0, 3, 9, 1, 1, 5}, {6});
  Variable loss = cross_entropy(model(Variable(images)), targets);
  loss.backward();
  nn::StateDict grads;
  for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad());
  return {loss.item(), grads};
}

TEST(MixedPrecision, ReachesEveryLinearAndConvolution) {
  VisionTransformer model(tiny(), std::make_shared<Generator>(0));
  nn::set_matmul_precision(model, MatmulPrecision::BF16);
  int linears = 0, convolutions = 0;
  model.apply([&](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) linears += l->precision == MatmulPrecision::BF16 ? 1 : 100;
    if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) convolutions += c->precision == MatmulPrecision::BF16 ? 1 : 100;
  });
  EXPECT_EQ(linears, 2 * 4 + 1);  // qkv, proj, fc1, fc2 per block, and the head
  EXPECT_EQ(convolutions, 2);     // the stem's and the patch projection
  nn::set_matmul_precision(model, MatmulPrecision::F32);
  model.apply([](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
      EXPECT_EQ(l->precision, MatmulPrecision::F32);
    }
  });
}

TEST(MixedPrecision, GradientsOfATrainingStepDifferFromFloat32OnlyAtBf16Level) {
  const auto [loss32, grads32] = step(MatmulPrecision::F32);
  const auto [loss16, grads16] = step(MatmulPrecision::BF16);
  EXPECT_NEAR(loss16, loss32, kBf16VsFloatTol.rtol * loss32);
  EXPECT_NE(loss16, loss32);
  ASSERT_EQ(grads16.size(), grads32.size());
  for (size_t i = 0; i < grads32.size(); ++i) {
    const auto& [name, g32] = grads32[i];
    const Tensor& g16 = grads16[i].second;
    EXPECT_EQ(g16.dtype(), DType::F32) << name;
    EXPECT_TRUE(testing::all_close(g16, g32, kBf16VsFloatTol, "grad." + name));
  }
  // The GEMMs' weights did run in bf16: their gradients are not float32's.
  for (const char* name : {"blocks.0.attn.qkv.weight", "blocks.1.mlp.fc2.weight", "patch_embed.proj.weight"}) {
    for (size_t i = 0; i < grads32.size(); ++i) {
      if (grads32[i].first != name) continue;
      const std::vector<double> a = grads16[i].second.to_vector(), b = grads32[i].second.to_vector();
      double diff = 0.0, scale = 0.0;
      for (size_t k = 0; k < a.size(); ++k)
        diff = std::max(diff, std::fabs(a[k] - b[k])), scale = std::max(scale, std::fabs(b[k]));
      EXPECT_GT(diff / scale, kBf16MinDifference) << name;
    }
  }
}

}  // namespace
}  // namespace vit::model
