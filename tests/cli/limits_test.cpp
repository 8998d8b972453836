// Refusals before any large allocation, through the `vit` command: models and batches that
// cannot fit in memory, datasets that cannot fit, images over the pixel limit (a flag).
#include <gtest/gtest.h>

#include <filesystem>

#include "data/image.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::vit;

TEST(Limits, ModelsAndBatchesThatCannotFitAreRefused) {
  expect_error(vit("bench --preset vit_base_patch16_224 --batch 100000000"),
               "[memory] running vit_base_patch16_224 with batch 100000000 (weights 330.2 MiB, activations for the "
               "batch ");
  const auto r = vit("bench --preset vit_base_patch16_224 --batch 100000000");
  EXPECT_NE(r.out.find("but this machine has"), std::string::npos) << r.out;
  expect_error(vit("bench --preset vit_tiny_patch16_224 --batch 100000000 --train"),
               "[memory] training vit_tiny_patch16_224 with batch 100000000");
  // A model whose weights alone are too large: refused before data is read or weights built.
  expect_error(vit("train --dim 1048576 --heads 1 --depth 1000 --data /nonexistent"),
               "[memory] training custom with batch 128 (weights ");
  // With the limit lowered (VIT_MEMORY_LIMIT, bytes), a small batch fits and a big one does not.
  EXPECT_EQ(vit("bench --preset vit_digits --batch 2 --iters 1 --warmup 0", "VIT_MEMORY_LIMIT=50000000").exit_code, 0);
  expect_error(vit("bench --preset vit_digits --batch 20000 --iters 1", "VIT_MEMORY_LIMIT=50000000"),
               "[memory] running vit_digits with batch 20000");
}

TEST(Limits, ImageFoldersThatCannotFitOrHoldBombsAreRefused) {
  TempDir dir;
  for (const char* split : {"train", "test"}) {
    for (const char* cls : {"cat", "dog"}) {
      std::filesystem::create_directories(dir.file(std::string(split) + "/" + cls));
      data::write_png(dir.file(std::string(split) + "/" + cls + "/a.png"),
                      data::Image{3, 40, 40, std::vector<uint8_t>(3 * 40 * 40, 100)});
    }
  }
  const std::string model =
      " --image-size 32 --patch-size 8 --dim 16 --depth 1 --heads 2 --num-classes 2 --epochs 1"
      " --batch-size 2 --threads 1 --out " +
      dir.file("run");
  // 40x40 = 1600 pixels: over a 1000-pixel limit.
  expect_error(vit("train --data " + dir.path() + model + " --max-pixels 1000"),
               "[image] " + dir.file("train/cat/a.png") + ": 40x40 = 1600 pixels exceeds the limit of 1000 pixels");
  // Nothing fits in 1 KiB of memory: refused before the model or the data is built.
  expect_error(vit("train --data " + dir.path() + model, "VIT_MEMORY_LIMIT=1024"),
               "[memory] training custom with batch 2");
  expect_error(vit("train --data " + dir.path() + model + " --max-pixels 0"), "[train] --max-pixels must be positive");
  // Within the limits it trains.
  const auto ok = vit("train --data " + dir.path() + model);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

}  // namespace
}  // namespace vit
