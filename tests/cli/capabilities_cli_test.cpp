// Every command asks the model what it can do (#29, finding 7): a CLIP image tower or a feature
// extractor has no classes to score or name (eval refuses it, attention draws its maps without a
// prediction), any classifier vit loads can be evaluated (not only our own files), and an int8
// copy of a foreign model keeps its family.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/image.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

const std::string kVariants = std::string(VIT_GOLDEN_DIR) + "/variants/";
const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";  // 3x32x32, 10 classes

std::string photo(testing::TempDir& dir, int64_t size) {
  data::Image image{3, size, size, std::vector<uint8_t>(static_cast<size_t>(3 * size * size))};
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  const std::string path = dir.file("photo.png");
  data::write_png(path, image);
  return path;
}

TEST(CapabilitiesCli, EvalRefusesModelsWithoutClassesAndTakesForeignClassifiers) {
  testing::TempDir dir;
  expect_error(vit("eval --checkpoint " + kVariants + "clip.hf.safetensors --heads 2 --data " + dir.file("none")),
               "[eval] " + kVariants +
                   "clip.hf.safetensors: clip-huggingface-checkpoint has no classifier head (its head is CLIP's "
                   "image projection): there are no classes to score (vit embed gives its embeddings)");
  expect_error(vit("eval --checkpoint " + kVariants + "dinov2.timm.safetensors --heads 2 --data " + dir.file("none")),
               "[eval] " + kVariants +
                   "dinov2.timm.safetensors: dinov2-timm-checkpoint has no classifier head (a feature extractor): "
                   "there are no classes to score");
  // A timm classifier (no class names: scored by position) on an image folder of its size.
  for (const char* split : {"train", "test"}) {
    for (const char* label : {"0", "1"}) {
      std::filesystem::create_directories(dir.file(std::string("data/") + split + "/" + label));
      data::Image image{3, 32, 32, std::vector<uint8_t>(3 * 32 * 32, label[0] == '0' ? 40 : 200)};
      data::write_png(dir.file(std::string("data/") + split + "/" + label + "/a.png"), image);
    }
  }
  const CommandResult r = vit("eval --checkpoint " + kTimm + " --heads 4 --data " + dir.file("data") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"images\":2"), std::string::npos) << r.out;
}

TEST(CapabilitiesCli, AttentionDrawsModelsWithoutAClassifierWithoutNamingAClass) {
  testing::TempDir dir;
  const std::string image = photo(dir, 56);
  const CommandResult dino = vit("attention --checkpoint " + kVariants + "dinov2.timm.safetensors --heads 2 " + image +
                                 " --out " + dir.file("dino.png"));
  ASSERT_EQ(dino.exit_code, 0) << dino.out;
  EXPECT_NE(dino.out.find("has no classifier head (a feature extractor): the maps only"), std::string::npos)
      << dino.out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("dino.png")));
  const CommandResult clip = vit("attention --checkpoint " + kVariants + "clip.hf.safetensors --heads 2 " + image +
                                 " --out " + dir.file("clip.png"));
  ASSERT_EQ(clip.exit_code, 0) << clip.out;
  EXPECT_NE(clip.out.find("(its head is CLIP's image projection): the maps only"), std::string::npos) << clip.out;
  EXPECT_EQ(clip.out.find("predicted"), std::string::npos) << clip.out;
}

TEST(CapabilitiesCli, AnInt8CopyOfAForeignModelKeepsItsFamily) {
  testing::TempDir dir;
  const std::string copy = dir.file("clip8.safetensors");
  const CommandResult q = vit("quantize --checkpoint " + kVariants + "clip.hf.safetensors --heads 2 --out " + copy);
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const CommandResult info = vit("info --checkpoint " + copy);
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("clip"), std::string::npos) << info.out;
  const CommandResult embed = vit("embed --checkpoint " + copy + " " + photo(dir, 56) + " --out " + dir.file("e.npy"));
  ASSERT_EQ(embed.exit_code, 0) << embed.out;
  EXPECT_NE(embed.out.find("; clip, vit layout)"), std::string::npos) << embed.out;
  expect_error(
      vit("eval --checkpoint " + copy + " --data " + dir.file("none")),
      "[eval] " + copy + ": clip-huggingface-checkpoint has no classifier head (its head is CLIP's image projection)");
}

// --precision bf16 where the inference session runs (predict, embed; serve and bench too); the
// attention maps come from the float32 graph and refuse it; other values are refused by name.
TEST(CapabilitiesCli, Bf16PrecisionRunsWhereTheSessionRunsAndIsRefusedElsewhere) {
  testing::TempDir dir;
  const std::string image = photo(dir, 40);
  const CommandResult fp32 = vit("predict --checkpoint " + kTimm + " --heads 4 --top-k 1 " + image);
  const CommandResult bf16 = vit("predict --checkpoint " + kTimm + " --heads 4 --top-k 1 --precision bf16 " + image);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.out;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.out;
  // The same top class (the label after the percentage).
  EXPECT_EQ(fp32.out.substr(fp32.out.rfind("%") + 1), bf16.out.substr(bf16.out.rfind("%") + 1)) << fp32.out << bf16.out;
  expect_error(
      vit("attention --checkpoint " + kTimm + " --heads 4 --precision bf16 " + image + " --out " + dir.file("a.png")),
      "[attention] --precision bf16: attention maps come from the float32 graph");
  const CommandResult bad = vit("predict --checkpoint " + kTimm + " --heads 4 --precision fp16 " + image);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--precision"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace vit
