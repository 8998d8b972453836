// TrivialAugmentWide and RandAugment (data/auto_augment.h): the policy strings, each operation's
// arithmetic on small images (torchvision's uint8 rules), the policies' determinism, and the
// training loader applying them keyed by (batch, row) so a rank's slice is the same rows.
#include "data/auto_augment.h"

#include <gtest/gtest.h>

#include <numeric>

#include "data/loader.h"
#include "support/errors.h"

namespace vit::data {
namespace {

using testing::error_of;

std::vector<uint8_t> applied(AugmentOp op, double m, std::vector<uint8_t> p, int64_t c, int64_t h, int64_t w) {
  apply_augment_op(op, m, p.data(), c, h, w);
  return p;
}

TEST(AutoAugment, PolicyStringsAreParsedOrRefusedNamingTheFlag) {
  EXPECT_EQ(parse_auto_augment("").kind, AutoAugment::Kind::None);
  EXPECT_EQ(parse_auto_augment("none").kind, AutoAugment::Kind::None);
  EXPECT_EQ(parse_auto_augment("ta_wide").kind, AutoAugment::Kind::TrivialWide);
  const AutoAugment r = parse_auto_augment("rand");
  EXPECT_EQ(r.kind, AutoAugment::Kind::Rand);
  EXPECT_EQ(r.magnitude, 9);
  EXPECT_EQ(r.ops, 2);
  const AutoAugment q = parse_auto_augment("rand-n3-m30");
  EXPECT_EQ(q.magnitude, 30);
  EXPECT_EQ(q.ops, 3);
  for (const char* bad : {"rand-m31", "rand-n0", "rand-m9-mstd0.5", "ta", "randx", "rand-", "rand-m"}) {
    EXPECT_NE(error_of([&] { parse_auto_augment(bad, "--auto-augment"); }).find("--auto-augment '" + std::string(bad)),
              std::string::npos)
        << bad;
  }
}

TEST(AutoAugment, ColourOperationsFollowTorchvisionsUint8Arithmetic) {
  const std::vector<uint8_t> one = {0xAB, 200, 100, 10};
  EXPECT_EQ(applied(AugmentOp::Posterize, 4, one, 1, 2, 2), (std::vector<uint8_t>{0xA0, 192, 96, 0}));
  EXPECT_EQ(applied(AugmentOp::Solarize, 128, one, 1, 2, 2), (std::vector<uint8_t>{255 - 0xAB, 55, 100, 10}));
  EXPECT_EQ(applied(AugmentOp::Brightness, 0.5, one, 1, 2, 2), (std::vector<uint8_t>{255, 255, 150, 15}));
  EXPECT_EQ(applied(AugmentOp::AutoContrast, 0, {50, 100, 150, 150}, 1, 2, 2),
            (std::vector<uint8_t>{0, 127, 255, 255}));
  // Equalize: two values, half each -> 0 and 255.
  std::vector<uint8_t> halves(512, 10);
  std::fill(halves.begin() + 256, halves.end(), 20);
  const std::vector<uint8_t> eq = applied(AugmentOp::Equalize, 0, halves, 1, 16, 32);
  EXPECT_EQ(eq.front(), 0);
  EXPECT_EQ(eq.back(), 255);
  // Contrast at factor 0 (m = -1): every pixel the grey mean; colour at factor 0: the grey image.
  const std::vector<uint8_t> rgb = {255, 0, 0, 0, 0, 255, 0, 0, 0, 0, 255, 0};  // 3 x 2 x 2: red, green, blue, black
  const std::vector<uint8_t> flat = applied(AugmentOp::Contrast, -1, rgb, 3, 2, 2);
  // grey: 76, 149, 29, 0 (truncated) -> mean 63.5 -> 63
  EXPECT_EQ(flat, std::vector<uint8_t>(12, 63));
  const std::vector<uint8_t> grey = applied(AugmentOp::Color, -1, rgb, 3, 2, 2);
  EXPECT_EQ(std::vector<uint8_t>(grey.begin(), grey.begin() + 4), (std::vector<uint8_t>{76, 149, 29, 0}));
  EXPECT_EQ(std::vector<uint8_t>(grey.begin() + 8, grey.end()), (std::vector<uint8_t>{76, 149, 29, 0}));
  // Sharpness at factor 1 and identity change nothing; at factor 0 the centre is blurred, the border kept.
  std::vector<uint8_t> dot(9, 0);
  dot[4] = 130;
  EXPECT_EQ(applied(AugmentOp::Sharpness, 0, dot, 1, 3, 3), dot);
  const std::vector<uint8_t> blurred = applied(AugmentOp::Sharpness, -1, dot, 1, 3, 3);
  EXPECT_EQ(blurred[4], 50);  // round(130 * 5 / 13)
  EXPECT_EQ(blurred[0], 0);
}

TEST(AutoAugment, GeometricOperationsMovePixelsAndFillWithZero) {
  std::vector<uint8_t> ramp(16);
  std::iota(ramp.begin(), ramp.end(), 1);  // 4 x 4
  const std::vector<uint8_t> shifted = applied(AugmentOp::TranslateX, 2, ramp, 1, 4, 4);
  EXPECT_EQ(std::vector<uint8_t>(shifted.begin(), shifted.begin() + 4), (std::vector<uint8_t>{0, 0, 1, 2}));
  const std::vector<uint8_t> down = applied(AugmentOp::TranslateY, -1, ramp, 1, 4, 4);
  EXPECT_EQ(down[0], 5);
  EXPECT_EQ(down[12], 0);
  EXPECT_EQ(applied(AugmentOp::Rotate, 0, ramp, 1, 4, 4), ramp);
  const std::vector<uint8_t> quarter = applied(AugmentOp::Rotate, 90, ramp, 1, 4, 4);
  std::vector<uint8_t> sorted = quarter;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, [&] {
    std::vector<uint8_t> r = ramp;
    return r;
  }()) << "a quarter turn of a square moves every pixel, losing none";
  EXPECT_NE(quarter, ramp);
  const std::vector<uint8_t> sheared = applied(AugmentOp::ShearX, 0.5, ramp, 1, 4, 4);
  EXPECT_EQ(std::vector<uint8_t>(sheared.begin(), sheared.begin() + 4),
            std::vector<uint8_t>(ramp.begin(), ramp.begin() + 4));
  EXPECT_NE(sheared, ramp);
}

TEST(AutoAugment, PoliciesAreDeterministicPerStreamAndChangeImages) {
  std::vector<uint8_t> image(3 * 16 * 16);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>((i * 29) % 241);
  for (const char* text : {"ta_wide", "rand-m9-n2"}) {
    const AutoAugment policy = parse_auto_augment(text);
    int changed = 0;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      std::vector<uint8_t> a = image, b = image;
      Generator ga(seed), gb(seed);
      apply_auto_augment(policy, a.data(), 3, 16, 16, ga);
      apply_auto_augment(policy, b.data(), 3, 16, 16, gb);
      EXPECT_EQ(a, b) << text << " seed " << seed;
      changed += a != image;
    }
    EXPECT_GT(changed, 25) << text;
  }
}

TEST(AutoAugment, TheLoaderAppliesItPerRowSoSlicesAreTheBatchsRows) {
  Dataset d;
  d.channels = 3;
  d.height = d.width = 8;
  d.class_names = {"a", "b"};
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t p = 0; p < 192; ++p) d.pixels.push_back(static_cast<uint8_t>((i * 40 + p * 3) % 256));
    d.labels.push_back(i % 2);
  }
  const Normalization norm{{0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}};
  AugmentConfig aug;
  aug.auto_augment = "ta_wide";
  const std::vector<int64_t> idx = {0, 1, 2, 3, 4, 5};
  const Batch full = make_batch(d, idx, aug, norm, true, 77);
  const Batch again = make_batch(d, idx, aug, norm, true, 77);
  const Batch plain = make_batch(d, idx, {}, norm, true, 77);
  const Batch slice = make_batch(d, idx, aug, norm, true, 77, {2, 5});
  const std::vector<double> f = full.images.to_vector(), s = slice.images.to_vector();
  EXPECT_EQ(f, again.images.to_vector());
  EXPECT_NE(f, plain.images.to_vector());
  EXPECT_EQ(s, std::vector<double>(f.begin() + 2 * 192, f.begin() + 5 * 192));
  // Evaluation batches are never augmented.
  EXPECT_EQ(make_batch(d, idx, aug, norm, false, 77).images.to_vector(),
            make_batch(d, idx, {}, norm, false, 77).images.to_vector());
}

}  // namespace
}  // namespace vit::data
