// evaluate() on a dataset without images is an error (it returned loss 0 and accuracy 0 for no
// images, which a report would show as a score).
#include <gtest/gtest.h>

#include "train/evaluate.h"

namespace vit::train {
namespace {

TEST(Evaluate, RefusesAnEmptyDataset) {
  model::ViTConfig c;
  c.image_size = 8;
  c.patch_size = 4;
  c.in_channels = 1;
  c.num_classes = 3;
  c.dim = 8;
  c.depth = 1;
  c.num_heads = 2;
  model::VisionTransformer model(c, std::make_shared<Generator>(0));
  data::Dataset empty;
  empty.channels = 1;
  empty.height = empty.width = 8;
  empty.class_names = {"a", "b", "c"};
  empty.source = "data/test";
  try {
    evaluate(model, empty, {{0.5}, {0.5}}, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[evaluate] data/test: no images to evaluate on");
  }
}

}  // namespace
}  // namespace vit::train
