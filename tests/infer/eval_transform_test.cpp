// An image folder shaped by a model's evaluation transform (what `vit eval` does to every photo)
// gives each photo bit for bit the tensor `vit predict` makes of it (infer::preprocess_into): the
// shorter side resized with PIL's filter, the centre crop, the normalisation; held in memory or
// streamed. A transform that does not give the dataset's size is refused naming the photo.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"
#include "data/loader.h"
#include "infer/preprocess.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::infer {
namespace {

TEST(EvalTransform, AnImageFolderIsShapedAsVitPredictShapesEachPhoto) {
  testing::TempDir dir;
  for (int c = 0; c < 2; ++c) {
    const std::string cls = dir.file(std::string("train/") + (c == 0 ? "a" : "b"));
    std::filesystem::create_directories(cls);
    for (int i = 0; i < 3; ++i) {
      const int64_t h = i == 1 ? 45 : 30 + 3 * i, w = i == 1 ? 31 : 40 + c;
      data::Image im{3, h, w, std::vector<uint8_t>(static_cast<size_t>(3 * h * w))};
      for (size_t p = 0; p < im.pixels.size(); ++p) im.pixels[p] = static_cast<uint8_t>((p * (5 + i + 2 * c)) % 249);
      data::write_png(cls + "/" + std::to_string(i) + ".png", im);
    }
  }
  Preprocess p;
  p.resize = 32;
  p.square = false;
  p.crop = 28;
  p.filter = Filter::Bicubic;
  p.mean = {0.4, 0.5, 0.6};
  p.std = {0.2, 0.25, 0.3};
  const data::ImageShaper shaper = [p](const data::Image& image) {
    return resize_and_crop(data::convert_channels(image, 3), p);
  };
  const data::Normalization norm{p.mean, p.std};
  const data::Dataset listed =
      data::load_image_folder(dir.file("train"), 3, 28, data::kDefaultMaxPixels, data::Residency::Stream, shaper);
  for (const data::Residency residency : {data::Residency::Memory, data::Residency::Stream}) {
    const data::Dataset d =
        data::load_image_folder(dir.file("train"), 3, 28, data::kDefaultMaxPixels, residency, shaper);
    ASSERT_EQ(d.size(), 6);
    for (int64_t i = 0; i < d.size(); ++i) {
      const data::Batch batch = data::make_batch(d, {i}, {}, norm, false, 0);
      std::vector<float> want(3 * 28 * 28);
      preprocess_into(data::read_image(listed.files[static_cast<size_t>(i)]), p, 3, want.data());
      const float* got = batch.images.data<float>();
      double worst = 0;
      for (size_t k = 0; k < want.size(); ++k) worst = std::max(worst, std::fabs(double(got[k]) - double(want[k])));
      EXPECT_EQ(worst, 0.0) << "image " << i << (residency == data::Residency::Stream ? " streamed" : " in memory");
    }
  }
  // A transform to another size: refused, naming the photo.
  Preprocess small = p;
  small.crop = 20;
  const data::ImageShaper wrong = [small](const data::Image& image) {
    return resize_and_crop(data::convert_channels(image, 3), small);
  };
  const std::string e = testing::error_of([&] {
    data::load_image_folder(dir.file("train"), 3, 28, data::kDefaultMaxPixels, data::Residency::Memory, wrong);
  });
  EXPECT_NE(e.find(listed.files[0] + ": shaped to 3x20x20, not the 3x28x28 of the dataset"), std::string::npos) << e;
}

}  // namespace
}  // namespace vit::infer
