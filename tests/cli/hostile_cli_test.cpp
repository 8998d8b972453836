// What a hostile new user tried on the command line (issue "one crash, lost runs, silently
// wrong numbers", families 10 and 11): each ends in a clear message naming what was wrong and a
// non-zero exit, or does what the flag says -- never silently something else.
#include <gtest/gtest.h>

#include <string>

#include "data/image.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors --heads 4";  // 3x32x32, 10 classes

std::string write_photo(const TempDir& dir, const std::string& name) {
  data::Image image{3, 32, 32, std::vector<uint8_t>(3 * 32 * 32)};
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>((i * 29) % 251);
  data::write_png(dir.file(name), image);
  return dir.file(name);
}

TEST(HostileCli, UnknownCommandIsNamed) {
  const CommandResult r = vit("foo --bar");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("error: unknown command 'foo' (commands: train, eval, predict"), std::string::npos) << r.out;
}

TEST(HostileCli, MemoryLimitThatIsNotANumberIsRefused) {
  for (const char* value : {"abc", "-5", "12GB", "0"}) {
    expect_error(vit("info --preset vit_digits", std::string("VIT_MEMORY_LIMIT=") + value),
                 std::string("[memory] VIT_MEMORY_LIMIT='") + value + "' is not a positive number of bytes");
  }
  EXPECT_EQ(vit("info --preset vit_digits", "VIT_MEMORY_LIMIT=8000000000").exit_code, 0);
}

TEST(HostileCli, AttentionWritesTheFormatItsExtensionNames) {
  TempDir dir;
  const std::string photo = write_photo(dir, "photo.png");
  const CommandResult jpg =
      vit("attention --checkpoint " + kTimm + " " + photo + " --size 32 --out " + dir.file("m.jpg"));
  ASSERT_EQ(jpg.exit_code, 0) << jpg.out;
  const std::vector<uint8_t> bytes = testing::read_bytes(dir.file("m.jpg"));
  ASSERT_GT(bytes.size(), 3u);
  EXPECT_EQ(bytes[0], 0xFF);  // a JPEG, not PNG bytes under a .jpg name
  EXPECT_EQ(bytes[1], 0xD8);
  EXPECT_EQ(data::read_image(dir.file("m.jpg")).width, 3 * 32 + 16);
  expect_error(
      vit("attention --checkpoint " + kTimm + " " + photo + " --out " + dir.file("m.gif")),
      "[image] " + dir.file("m.gif") + ": cannot tell the image format from '.gif' (write .png, .jpg or .bmp)");
}

TEST(HostileCli, PredictReportsEveryImageAndFailsAtTheEnd) {
  TempDir dir;
  const std::string good = write_photo(dir, "good.png"), other = write_photo(dir, "other.png");
  testing::write_bytes(dir.file("bad.png"), {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  const CommandResult r = vit("predict --checkpoint " + kTimm + " --top-k 2 --batch-size 2 " + good + " " +
                              dir.file("bad.png") + " " + other);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find(good + "\n  "), std::string::npos) << r.out;   // its classes
  EXPECT_NE(r.out.find(other + "\n  "), std::string::npos) << r.out;  // after the bad one, too
  EXPECT_NE(r.out.find(dir.file("bad.png") + "\n  error: [image] " + dir.file("bad.png")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: [predict] 1 of 3 images could not be read: " + dir.file("bad.png")), std::string::npos)
      << r.out;
}

TEST(HostileCli, PreprocessingValuesMustMakeSense) {
  TempDir dir;
  const std::string photo = write_photo(dir, "photo.png");
  expect_error(vit("predict --checkpoint " + kTimm + " " + photo + " --mean inf"),
               "[load] --mean: must be a finite number, got 'inf'");
  expect_error(vit("predict --checkpoint " + kTimm + " " + photo + " --std 0.2 0.2"),
               "[preprocess] --std needs 1 or 3 values (one value for all channels, or one per channel), got 2");
}

// Values that used to be accepted or ignored without a word.
TEST(HostileCli, FlagValuesAreCheckedWithShortMessages) {
  auto refused = [](const std::string& args, const std::string& message) {
    const CommandResult r = vit(args);
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_LT(r.out.size(), 300u) << "no 300-digit ranges: " << r.out;
  };
  refused("bench --batch 0", "--batch: must be a positive number, got 0");
  refused("eval --checkpoint x --batch-size 0", "--batch-size: must be a positive number, got 0");
  refused("predict --checkpoint x a.png --threads -1", "--threads: must be 0 (all ");
  refused("train --threads 100000", "or a thread count up to 1024, got 100000");
  refused("train --seed -1", "--seed: must be a whole number >= 0, got -1");
  refused("train --clip-grad -1", "error: [train] --clip-grad must be >= 0 (0 turns clipping off), got -1");
  refused("train --no-augment --rotate 5", "--rotate excludes --no-augment");
  refused("train --hflip --no-augment", "excludes");
}

TEST(HostileCli, FlagsThatDoNotApplyAreRefused) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 64, 16);
  const CommandResult t = vit("train --data " + dir.file("data") + " --out " + dir.file("run") +
                              " --dim 16 --depth 1 --heads 2 --epochs 1 --batch-size 32 --threads 1");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  const std::string ours = dir.file("run/last.safetensors");
  data::Image digit{1, 28, 28, std::vector<uint8_t>(784, 9)};
  data::write_png(dir.file("digit.png"), digit);
  expect_error(vit("predict --checkpoint " + ours + " --layout huggingface " + dir.file("digit.png")),
               "[checkpoint] " + ours +
                   ": a checkpoint written by vit train (weights under timm's names); --layout "
                   "huggingface does not apply to it");
  expect_error(vit("predict --checkpoint " + kTimm + " --ema " + write_photo(dir, "photo.png")),
               "[checkpoint] " + std::string(VIT_GOLDEN_DIR) +
                   "/layouts/timm.safetensors: --ema picks the EMA weights of a checkpoint written by vit train, or "
                   "a PyTorch file's EMA state dict (state_dict_ema, model_ema); this timm file has none");
  // --resume names the run folder, not --out.
  expect_error(vit("train --resume " + ours), "[train] --resume " + ours + ": exists and is not a directory");
}

}  // namespace
}  // namespace vit
