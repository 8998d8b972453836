// Batches: normalisation, seeded shuffling, augmentation determinism, mixup / cutmix, and the
// background loader producing exactly what make_batch computes.
#include "data/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/check.h"
#include "support/errors.h"
#include "support/files.h"
#include "support/tolerances.h"

namespace vit::data {
namespace {

Dataset toy(int64_t n) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), n, 10);
  return load_dataset(dir.path(), Split::Train, 1, 28);
}

// Per-channel statistics of the pixels scaled to [0, 1], against a direct double computation;
// a constant channel keeps std 1 (no division by zero).
TEST(Normalization, ComputedPerChannelFromTheData) {
  Dataset d;
  d.channels = 2;
  d.height = 1;
  d.width = 3;
  d.pixels = {0, 255, 51, 7, 7, 7, 255, 255, 102, 7, 7, 7};  // two images (C, H, W)
  d.labels = {0, 1};
  d.class_names = {"a", "b"};
  const Normalization n = compute_normalization(d);
  const std::vector<double> first = {0, 1, 0.2, 1, 1, 0.4};
  double mean = 0, var = 0;
  for (double v : first) mean += v / 6;
  for (double v : first) var += (v - mean) * (v - mean) / 6;
  ASSERT_EQ(n.mean.size(), 2u);
  EXPECT_NEAR(n.mean[0], mean, testing::kDoubleFormulaTol);
  EXPECT_NEAR(n.std[0], std::sqrt(var), testing::kDoubleFormulaTol);
  EXPECT_NEAR(n.mean[1], 7.0 / 255, testing::kDoubleFormulaTol);
  EXPECT_EQ(n.std[1], 1.0);
  EXPECT_THROW(compute_normalization(Dataset{}), Error);
}

TEST(Batches, EpochOrderIsASeededPermutation) {
  const auto a = epoch_batches(100, 32, true, false, 7, 3), b = epoch_batches(100, 32, true, false, 7, 3);
  const auto other_epoch = epoch_batches(100, 32, true, false, 7, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other_epoch);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a.back().size(), 4u);
  std::set<int64_t> seen;
  for (const auto& batch : a) seen.insert(batch.begin(), batch.end());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(epoch_batches(100, 32, true, true, 7, 3).size(), 3u);  // drop_last
  EXPECT_EQ(epoch_batches(10, 32, false, false, 0, 0).front(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_THROW(epoch_batches(10, 0, false, false, 0, 0), Error);
}

TEST(Batches, NormalisesWithoutAugmentation) {
  const Dataset d = toy(4);
  const uint64_t gen = 0;  // the batch's random key
  const Batch b = make_batch(d, {2, 0}, {}, {{0.5}, {0.25}}, true, gen);
  EXPECT_EQ(b.images.shape(), (Shape{2, 1, 28, 28}));
  EXPECT_EQ(b.targets.to_vector(),
            (std::vector<double>{static_cast<double>(d.labels[2]), static_cast<double>(d.labels[0])}));
  EXPECT_NEAR(b.images.at({0, 0, 5, 7}), (d.image(2)[5 * 28 + 7] / 255.0 - 0.5) / 0.25, testing::kFloatValueTol);
  EXPECT_FALSE(b.targets_b.defined());
  EXPECT_EQ(b.lam, 1.0);
  EXPECT_THROW(make_batch(d, {0}, {}, {{0.5, 0.5}, {1, 1}}, false, gen), Error);
  EXPECT_THROW(make_batch(d, {99}, {}, {{0.5}, {1}}, false, gen), Error);
}

TEST(Batches, AugmentationIsSeededAndOnlyInTraining) {
  const Dataset d = toy(8);
  AugmentConfig aug;
  aug.rotate_degrees = 15;
  aug.translate = 0.1;
  aug.scale_min = 0.9;
  aug.scale_max = 1.1;
  aug.crop_padding = 2;
  aug.hflip = true;
  const uint64_t g1 = 5, g2 = 5, g3 = 6, g4 = 0;  // random keys
  const Normalization norm{{0.0}, {1.0}};
  const Batch a = make_batch(d, {0, 1, 2}, aug, norm, true, g1);
  const Batch b = make_batch(d, {0, 1, 2}, aug, norm, true, g2);
  const Batch c = make_batch(d, {0, 1, 2}, aug, norm, true, g3);
  const Batch plain = make_batch(d, {0, 1, 2}, aug, norm, false, g4);  // evaluation: no augmentation
  EXPECT_EQ(a.images.to_vector(), b.images.to_vector());
  EXPECT_NE(a.images.to_vector(), c.images.to_vector());
  EXPECT_NE(a.images.to_vector(), plain.images.to_vector());
  EXPECT_NEAR(plain.images.at({1, 0, 3, 4}), d.image(1)[3 * 28 + 4] / 255.0, testing::kFloatValueTol);
  for (double v : a.images.to_vector()) EXPECT_TRUE(v >= 0.0 && v <= 1.0);
}

// Random erasing replaces one box (2-33% of the image) of each image by noise and leaves the
// rest as it was; evaluation batches are never erased.
TEST(Batches, RandomErasingReplacesOneBoxPerImage) {
  const Dataset d = toy(16);
  AugmentConfig aug;
  aug.erase_prob = 1.0;
  const Normalization norm{{0.0}, {1.0}};
  std::vector<int64_t> all(16);
  for (int64_t i = 0; i < 16; ++i) all[i] = i;
  const uint64_t g1 = 3, g2 = 0;
  const Batch erased = make_batch(d, all, aug, norm, true, g1);
  const Batch plain = make_batch(d, all, {}, norm, true, g2);
  const Batch evaluated = make_batch(d, all, aug, norm, false, g2);
  EXPECT_EQ(evaluated.images.to_vector(), plain.images.to_vector());
  const std::vector<double> e = erased.images.to_vector(), p = plain.images.to_vector();
  for (int64_t i = 0; i < 16; ++i) {
    int64_t top = 28, bottom = -1, left = 28, right = -1, changed = 0;
    for (int64_t y = 0; y < 28; ++y) {
      for (int64_t x = 0; x < 28; ++x) {
        const size_t at = static_cast<size_t>((i * 28 + y) * 28 + x);
        if (e[at] == p[at]) continue;
        ++changed;
        top = std::min(top, y), bottom = std::max(bottom, y), left = std::min(left, x), right = std::max(right, x);
      }
    }
    const int64_t box = (bottom - top + 1) * (right - left + 1);
    EXPECT_GT(changed, 0) << "image " << i;
    EXPECT_LE(box, 28 * 28 / 3 + 28) << "image " << i;  // at most a third (rounding of the sides)
    EXPECT_GE(changed, box * 9 / 10) << "image " << i;  // a filled box, not scattered pixels
  }
  AugmentConfig none;
  none.erase_prob = 0.0;
  EXPECT_FALSE(none.any());
  EXPECT_TRUE(aug.any());
}

TEST(Batches, MixupAndCutmixPairWithTheFlippedBatch) {
  const Dataset d = toy(6);
  const Normalization norm{{0.0}, {1.0}};
  AugmentConfig mixup;
  mixup.mixup_alpha = 0.4;
  const uint64_t gen = 3, plain_gen = 0;
  const Batch clean = make_batch(d, {0, 1, 2, 3}, {}, norm, true, plain_gen);
  const Batch m = make_batch(d, {0, 1, 2, 3}, mixup, norm, true, gen);
  ASSERT_TRUE(m.targets_b.defined());
  EXPECT_GT(m.lam, 0.0);
  EXPECT_LT(m.lam, 1.0);
  EXPECT_EQ(m.targets_b.at({0}), clean.targets.at({3}));
  EXPECT_NEAR(m.images.at({0, 0, 10, 10}),
              m.lam * clean.images.at({0, 0, 10, 10}) + (1 - m.lam) * clean.images.at({3, 0, 10, 10}),
              testing::kFloatSumTol);
  AugmentConfig cutmix;
  cutmix.cutmix_alpha = 1.0;
  const uint64_t gen2 = 4;
  const Batch c = make_batch(d, {0, 1, 2, 3}, cutmix, norm, true, gen2);
  ASSERT_TRUE(c.targets_b.defined());
  // Every pixel comes from the image itself or its partner; lam is the fraction kept.
  int64_t kept = 0;
  for (int64_t y = 0; y < 28; ++y) {
    for (int64_t x = 0; x < 28; ++x) {
      const double v = c.images.at({1, 0, y, x});
      const bool own = v == clean.images.at({1, 0, y, x}), partner = v == clean.images.at({2, 0, y, x});
      EXPECT_TRUE(own || partner);
      kept += own;
    }
  }
  EXPECT_NEAR(c.lam, static_cast<double>(kept) / 784.0, testing::kCutmixLamTol);
}

// A slice of a global batch holds exactly those rows of the whole batch -- augmentation, random
// erasing, and mixup/cutmix with partners outside the slice included -- and the loader's shares
// of every batch (one per rank) put back together are the whole batches.
TEST(Batches, SlicesAreRowsOfTheWholeBatch) {
  const Dataset d = toy(20);
  const Normalization norm{{0.1}, {0.3}};
  std::vector<int64_t> all(11);
  for (int64_t i = 0; i < 11; ++i) all[i] = 10 - i;
  for (const bool use_cutmix : {false, true}) {
    AugmentConfig aug;
    aug.rotate_degrees = 10;
    aug.crop_padding = 2;
    aug.hflip = true;
    aug.erase_prob = 0.5;
    (use_cutmix ? aug.cutmix_alpha : aug.mixup_alpha) = 0.8;
    const Batch whole = make_batch(d, all, aug, norm, true, 42);
    ASSERT_LT(whole.lam, 1.0);
    for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 4}, {4, 7}, {7, 11}, {5, 6}}) {
      const Batch part = make_batch(d, all, aug, norm, true, 42, {begin, end});
      EXPECT_EQ(part.first, begin);
      EXPECT_EQ(part.global_size, 11);
      EXPECT_EQ(part.lam, whole.lam);
      EXPECT_EQ(part.indices, std::vector<int64_t>(all.begin() + begin, all.begin() + end));
      EXPECT_EQ(part.images.to_vector(), whole.images.slice(0, begin, end).contiguous().to_vector())
          << begin << ".." << end << (use_cutmix ? " cutmix" : " mixup");
      EXPECT_EQ(part.targets_b.to_vector(), whole.targets_b.slice(0, begin, end).contiguous().to_vector());
    }
  }
  EXPECT_THROW(make_batch(d, all, {}, norm, true, 1, {3, 12}), Error);
  EXPECT_THROW(make_batch(d, all, {}, norm, true, 1, {5, 4}), Error);

  AugmentConfig aug;
  aug.rotate_degrees = 10;
  aug.mixup_alpha = 0.4;
  const auto batches = epoch_batches(d.size(), 7, true, false, 3, 1);
  const LoaderOptions options{.augment = aug, .norm = norm, .train = true, .seed = 3, .epoch = 1};
  auto share = [&](int64_t part, int64_t parts) {
    LoaderOptions o = options;
    o.part = part;
    o.parts = parts;
    return o;
  };
  BatchLoader whole(d, batches, options);
  BatchLoader rank0(d, batches, share(0, 3)), rank1(d, batches, share(1, 3)), rank2(d, batches, share(2, 3));
  while (auto w = whole.next()) {
    std::vector<double> joined;
    for (BatchLoader* rank : {&rank0, &rank1, &rank2}) {
      const auto part = rank->next();
      ASSERT_TRUE(part.has_value());
      const std::vector<double> rows = part->images.to_vector();
      joined.insert(joined.end(), rows.begin(), rows.end());
    }
    EXPECT_EQ(joined, w->images.to_vector());
  }
  EXPECT_THROW(BatchLoader(d, batches, share(3, 3)), Error);
}

TEST(Loader, BackgroundBatchesEqualDirectOnesAndErrorsPropagate) {
  const Dataset d = toy(50);
  AugmentConfig aug;
  aug.rotate_degrees = 10;
  const Normalization norm{{0.1}, {0.3}};
  const auto batches = epoch_batches(d.size(), 16, true, false, 9, 2);
  const LoaderOptions options{.augment = aug, .norm = norm, .train = true, .seed = 9, .epoch = 2, .prefetch = 2};
  BatchLoader loader(d, batches, options);
  EXPECT_EQ(loader.num_batches(), 4u);
  for (size_t i = 0; i < batches.size(); ++i) {
    auto got = loader.next();
    ASSERT_TRUE(got.has_value());
    const Batch want = make_batch(d, batches[i], aug, norm, true, mix_seed(9, 3, i + 1));
    EXPECT_EQ(got->images.to_vector(), want.images.to_vector()) << "batch " << i;
    EXPECT_EQ(got->indices, batches[i]);
  }
  EXPECT_FALSE(loader.next().has_value());
  BatchLoader bad(d, {{0, 1}, {1000}}, {.augment = {}, .norm = norm});
  EXPECT_TRUE(bad.next().has_value());
  EXPECT_THROW(bad.next(), Error);
  {
    LoaderOptions one_ahead = options;
    one_ahead.prefetch = 1;
    BatchLoader abandoned(d, batches, one_ahead);
  }  // destroyed mid-epoch: joins cleanly
}

}  // namespace
}  // namespace vit::data

namespace vit::data {
namespace {

// A streamed folder makes the very batches the folder held in memory makes: every augmentation and
// mixup/cutmix (keyed randomness), slices of a batch (a row's partner outside the slice decoded
// too), any number of loader threads; its normalisation over all images when there are fewer than
// the sample; the BatchLoader runs it; a file broken after the listing stops the batch naming it.
TEST(StreamedFolder, MakesTheBatchesOfTheFolderHeldInMemory) {
  testing::TempDir dir;
  for (int c = 0; c < 3; ++c) {
    const std::string cls = "class" + std::to_string(c);
    std::filesystem::create_directories(dir.file("train/" + cls));
    for (int i = 0; i < 4; ++i) {
      Image img{3, 17 + 3 * i, 23 - 2 * c, {}};
      img.pixels.resize(static_cast<size_t>(img.channels * img.height * img.width));
      for (size_t p = 0; p < img.pixels.size(); ++p) img.pixels[p] = static_cast<uint8_t>((p * (7 + i + 3 * c)) % 253);
      write_png(dir.file("train/" + cls + "/" + std::to_string(i) + ".png"), img);
    }
  }
  const Dataset memory = load_image_folder(dir.file("train"), 3, 10, kDefaultMaxPixels, Residency::Memory);
  const Dataset stream = load_image_folder(dir.file("train"), 3, 10, kDefaultMaxPixels, Residency::Stream);
  ASSERT_TRUE(stream.streamed());
  const Normalization norm = compute_normalization(memory);
  const Normalization streamed_norm = compute_normalization(stream);
  EXPECT_EQ(norm.mean, streamed_norm.mean);
  EXPECT_EQ(norm.std, streamed_norm.std);
  AugmentConfig aug;
  aug.crop_padding = 2;
  aug.hflip = true;
  aug.rotate_degrees = 10;
  aug.erase_prob = 0.5;
  aug.mixup_alpha = 0.8;
  aug.cutmix_alpha = 1.0;
  const std::vector<int64_t> indices = {11, 3, 7, 0, 5, 9, 2};
  for (int threads : {1, 3}) {
    set_loader_threads(threads);
    for (uint64_t key : {1u, 2u, 3u}) {
      for (const BatchSlice slice : {BatchSlice{}, BatchSlice{2, 5}}) {
        const Batch a = make_batch(memory, indices, aug, norm, true, key, slice);
        const Batch b = make_batch(stream, indices, aug, norm, true, key, slice);
        ASSERT_EQ(a.images.numel(), b.images.numel());
        EXPECT_EQ(0, std::memcmp(a.images.data<float>(), b.images.data<float>(),
                                 static_cast<size_t>(a.images.numel()) * sizeof(float)))
            << "threads " << threads << " key " << key << " slice " << slice.begin;
        EXPECT_EQ(a.lam, b.lam);
        EXPECT_EQ(a.indices, b.indices);
      }
    }
  }
  set_loader_threads(0);
  BatchLoader loader(stream, epoch_batches(stream.size(), 5, true, false, 7, 0), {aug, norm, true, 7, 0});
  int64_t seen = 0;
  while (const std::optional<Batch> batch = loader.next()) seen += batch->images.size(0);
  EXPECT_EQ(seen, stream.size());
  testing::write_bytes(stream.files[5], {'B', 'M', 0, 0});
  const std::string e = testing::error_of([&] { make_batch(stream, indices, aug, norm, true, 1); });
  EXPECT_NE(e.find(stream.files[5]), std::string::npos) << e;
}

}  // namespace
}  // namespace vit::data

namespace vit::data {
namespace {

// torchvision's RandomResizedCrop box: inside the image, area and aspect within the asked ranges
// (to rounding), the same for the same stream; an image whose aspect leaves no room falls back to
// its centre at the nearest allowed aspect.
TEST(RandomResizedCrop, BoxesKeepToTheirRangesAndFallBackToTheCentre) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Generator gen(seed), again(seed);
    const CropBox box = random_resized_box(375, 500, 0.08, gen);
    const CropBox same = random_resized_box(375, 500, 0.08, again);
    EXPECT_EQ(box.top, same.top);
    EXPECT_EQ(box.width, same.width);
    ASSERT_GE(box.top, 0);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.top + box.height, 375);
    ASSERT_LE(box.left + box.width, 500);
    const double share = static_cast<double>(box.height * box.width) / (375.0 * 500.0);
    EXPECT_GE(share, 0.07) << seed;
    const double aspect = static_cast<double>(box.width) / static_cast<double>(box.height);
    EXPECT_GE(aspect, 0.75 * 0.9) << seed;
    EXPECT_LE(aspect, 4.0 / 3.0 / 0.9) << seed;
  }
  Generator gen(1);
  const CropBox strip = random_resized_box(10, 1000, 0.99, gen);  // aspect 100: no try fits
  EXPECT_EQ(strip.height, 10);
  EXPECT_EQ(strip.width, 13);
  EXPECT_EQ(strip.left, (1000 - 13) / 2);
}

// In a batch: drawn per row from the batch's key (the same key, the same crops), from the original
// photo of a streamed folder; a scale of 1 on photos of allowed aspect is the whole photo, i.e. the
// batch without the crop.
TEST(RandomResizedCrop, CropsEachRowFromTheOriginalPhoto) {
  testing::TempDir dir;
  for (int c = 0; c < 2; ++c) {
    const std::string cls = dir.file(std::string("train/") + (c == 0 ? "x" : "y"));
    std::filesystem::create_directories(cls);
    for (int i = 0; i < 3; ++i) {
      const int64_t h = i == 0 ? 30 : 36, w = i == 0 ? 40 : 36;  // aspects 4/3 and 1
      Image img{3, h, w, std::vector<uint8_t>(static_cast<size_t>(3 * h * w))};
      for (size_t p = 0; p < img.pixels.size(); ++p) img.pixels[p] = static_cast<uint8_t>((p * (11 + i + 5 * c)) % 241);
      write_png(cls + "/" + std::to_string(i) + ".png", img);
    }
  }
  const Dataset stream = load_image_folder(dir.file("train"), 3, 16, kDefaultMaxPixels, Residency::Stream);
  const Dataset memory = load_image_folder(dir.file("train"), 3, 16, kDefaultMaxPixels, Residency::Memory);
  const Normalization norm{{0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}};
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5};
  auto bytes_of = [](const Batch& b) {
    const float* p = b.images.data<float>();
    return std::vector<float>(p, p + b.images.numel());
  };
  AugmentConfig plain, whole, rrc;
  whole.rrc_scale = 1.0;
  rrc.rrc_scale = 0.08;
  EXPECT_EQ(bytes_of(make_batch(stream, all, whole, norm, true, 4)),
            bytes_of(make_batch(stream, all, plain, norm, true, 4)));
  const std::vector<float> cropped = bytes_of(make_batch(stream, all, rrc, norm, true, 4));
  EXPECT_EQ(cropped, bytes_of(make_batch(stream, all, rrc, norm, true, 4)));
  EXPECT_NE(cropped, bytes_of(make_batch(stream, all, rrc, norm, true, 5)));
  EXPECT_NE(cropped, bytes_of(make_batch(stream, all, plain, norm, true, 4)));
  // Held in memory: cropped from the resized image instead (another image, same shape).
  const Batch held = make_batch(memory, all, rrc, norm, true, 4);
  EXPECT_EQ(held.images.shape(), make_batch(stream, all, rrc, norm, true, 4).images.shape());
  // Evaluation batches are never cropped.
  EXPECT_EQ(bytes_of(make_batch(stream, all, rrc, norm, false, 4)),
            bytes_of(make_batch(stream, all, plain, norm, false, 4)));
}

}  // namespace
}  // namespace vit::data
