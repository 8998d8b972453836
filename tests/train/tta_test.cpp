// Test-time augmentation in evaluate(): the mirror, the mean of the two views' probabilities
// (checked against the same session run by hand), mirror-symmetric images scoring as without TTA,
// and the option's names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "autograd/ops.h"
#include "infer/inference.h"
#include "train/evaluate.h"

namespace vit::train {
namespace {

model::ViTConfig tiny_config() {
  model::ViTConfig c;
  c.image_size = 8;
  c.patch_size = 4;
  c.in_channels = 1;
  c.num_classes = 3;
  c.dim = 8;
  c.depth = 1;
  c.num_heads = 2;
  return c;
}

// n random 8x8 images; symmetric: each row a palindrome (the image equals its mirror).
data::Dataset random_images(int64_t n, bool symmetric, uint32_t seed) {
  data::Dataset d;
  d.channels = 1;
  d.height = d.width = 8;
  d.class_names = {"a", "b", "c"};
  d.source = "memory";
  std::mt19937 gen(seed);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t y = 0; y < 8; ++y) {
      uint8_t row[8];
      for (int64_t x = 0; x < 8; ++x) row[x] = static_cast<uint8_t>(gen() % 256);
      if (symmetric) {
        for (int64_t x = 0; x < 4; ++x) row[7 - x] = row[x];
      }
      d.pixels.insert(d.pixels.end(), row, row + 8);
    }
    d.labels.push_back(static_cast<int64_t>(gen() % 3));
  }
  return d;
}

TEST(Tta, FlipMirrorsEachRow) {
  const Tensor x = Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 1, 2, 3});
  const Tensor y = flip_horizontal(x);
  EXPECT_EQ(y.shape(), x.shape());
  const std::vector<float> want = {3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
  EXPECT_THROW(flip_horizontal(Tensor::zeros({2, 3})), Error);
}

TEST(Tta, FlipAveragesTheTwoViewsProbabilities) {
  model::VisionTransformer model(tiny_config(), std::make_shared<Generator>(3));
  const data::Dataset d = random_images(40, false, 1);
  const data::Normalization norm{{0.5}, {0.25}};
  const EvalResult plain = evaluate(model, d, norm, 16);
  const EvalResult tta = evaluate(model, d, norm, 16, {}, infer::Precision::F32, Tta::Flip);
  // By hand: the same session on the images and on their mirrors.
  model.eval();
  NoGradGuard no_grad;
  infer::InferenceSession session(model, infer::InferenceSession::WeightPages::Keep);
  std::vector<int64_t> all(40);
  for (int64_t i = 0; i < 40; ++i) all[i] = i;
  const data::Batch batch = data::make_batch(d, all, {}, norm, false, 0);
  const Tensor p = softmax(Variable(session.forward(batch.images)), 1).data().contiguous();
  const Tensor q = softmax(Variable(session.forward(flip_horizontal(batch.images))), 1).data().contiguous();
  int64_t correct = 0;
  double loss = 0.0;
  for (int64_t b = 0; b < 40; ++b) {
    float mean[3];
    for (int64_t k = 0; k < 3; ++k) mean[k] = 0.5f * (p.data<float>()[b * 3 + k] + q.data<float>()[b * 3 + k]);
    const int64_t best = std::max_element(mean, mean + 3) - mean;
    correct += best == d.labels[b];
    EXPECT_EQ(tta.predictions[b], best) << b;
    loss -= std::log(static_cast<double>(mean[d.labels[b]]));
  }
  EXPECT_DOUBLE_EQ(tta.top1, static_cast<double>(correct) / 40.0);
  EXPECT_NEAR(tta.loss, loss / 40.0, 1e-6);
  EXPECT_NE(tta.loss, plain.loss);  // the mirrors changed something on random images
}

TEST(Tta, SymmetricImagesScoreAsWithoutIt) {
  model::VisionTransformer model(tiny_config(), std::make_shared<Generator>(5));
  const data::Dataset d = random_images(24, true, 2);
  const data::Normalization norm{{0.5}, {0.25}};
  const EvalResult plain = evaluate(model, d, norm, 8);
  const EvalResult tta = evaluate(model, d, norm, 8, {}, infer::Precision::F32, Tta::Flip);
  EXPECT_EQ(tta.predictions, plain.predictions);
  EXPECT_DOUBLE_EQ(tta.top1, plain.top1);
  EXPECT_NEAR(tta.loss, plain.loss, 1e-5);
}

TEST(Tta, Names) {
  EXPECT_EQ(parse_tta("none"), Tta::None);
  EXPECT_EQ(parse_tta("flip"), Tta::Flip);
  EXPECT_STREQ(tta_name(Tta::Flip), "flip");
  try {
    parse_tta("mirror");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tta mirror"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vit::train
