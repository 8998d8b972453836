// `vit train` refuses a normalisation no checkpoint could carry (the loader refuses means outside
// [0, 1] and stds outside (0, 1], pixels being scaled to [0, 1]), before training rather than
// at the first save, where the run would be lost.
#include <gtest/gtest.h>

#include "core/check.h"
#include "train/train_config.h"

namespace vit::train {
namespace {

std::string error_of(const TrainConfig& c) {
  try {
    c.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainConfigValidate, NormalisationOutsideThePixelRangeIsRefused) {
  TrainConfig c = digits_recipe();
  c.normalization = {{127.0}, {64.0}};  // a 0-255 scale
  EXPECT_EQ(error_of(c),
            "[train] --mean must be in [0, 1] and --std in (0, 1] (pixels are scaled to [0, 1]), got "
            "mean 127 std 64");
  c.normalization = {{0.5}, {1.5}};
  EXPECT_NE(error_of(c).find("got mean 0.5 std 1.5"), std::string::npos);
  c.normalization = {{-0.1}, {0.5}};
  EXPECT_NE(error_of(c).find("got mean -0.1 std 0.5"), std::string::npos);
  for (const data::Normalization& ok : {data::Normalization{{0.0}, {1.0}}, data::Normalization{{1.0}, {0.5}}}) {
    c.normalization = ok;
    EXPECT_EQ(error_of(c), "(no error)");
  }
}

}  // namespace
}  // namespace vit::train
