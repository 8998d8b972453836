// `vit train` and `vit eval` on an image folder streamed from disk (--data-residency stream) as a
// user types them: the run is the very run the folder held in memory gives (same batches, same
// weights, bit for bit), eval scores the same, the streamed mode is said, and bad values refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/image.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::TempDir;
using testing::vit;

const char* kStreamTiny =
    " --conv-stages 0 --channels 3 --image-size 28 --patch-size 7 --dim 16 --depth 1 --heads 2 --pool mean"
    " --batch-size 8 --threads 1 --plain --seed 3 --ema 0";

// JPEG photos of two sizes (not square, not the model's size) in train/ and test/, classes a, b.
std::string streamed_photo_folders(const TempDir& dir) {
  const std::string d = dir.file("photos");
  for (const char* split : {"train", "test"}) {
    for (int k = 0; k < 2; ++k) {
      const std::string cls = d + "/" + split + "/" + (k == 0 ? "a" : "b");
      fs::create_directories(cls);
      for (int i = 0; i < 10; ++i) {
        const int64_t h = 30 + 4 * (i % 3), w = 41 - 3 * (i % 2);
        data::Image im{3, h, w, std::vector<uint8_t>(static_cast<size_t>(3 * h * w))};
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x)
              im.pixels[static_cast<size_t>((c * h + y) * w + x)] =
                  static_cast<uint8_t>(((x < w / 2) == (k == 0) ? 190 : 40) + 5 * i + 9 * c);
        data::write_image(cls + "/" + std::to_string(i) + ".jpg", im);
      }
    }
  }
  return d;
}

TEST(StreamedDataCli, TrainsAndEvaluatesAsTheFolderHeldInMemory) {
  TempDir dir;
  const std::string data = streamed_photo_folders(dir);
  const CommandResult streamed = vit("train --data " + data + " --out " + dir.file("streamed") + kStreamTiny +
                                     " --epochs 2 --data-residency stream --loader-threads 3");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.out;
  EXPECT_NE(streamed.out.find(": 20 images streamed from disk"), std::string::npos) << streamed.out;
  EXPECT_NE(streamed.out.find("3 loader threads"), std::string::npos) << streamed.out;
  EXPECT_NE(streamed.out.find("  data: the steps waited "), std::string::npos) << streamed.out;
  const std::vector<uint8_t> metrics = testing::read_bytes(dir.file("streamed/metrics.jsonl"));
  EXPECT_NE(std::string(metrics.begin(), metrics.end()).find("\"data_wait_seconds\":"), std::string::npos);
  const CommandResult memory = vit("train --data " + data + " --out " + dir.file("memory") + kStreamTiny +
                                   " --epochs 2 --data-residency memory");
  ASSERT_EQ(memory.exit_code, 0) << memory.out;
  EXPECT_EQ(memory.out.find("streamed from disk"), std::string::npos) << memory.out;
  // The same batches in the same order: the same weights, bit for bit.
  const io::WeightsFile a = io::load_safetensors(dir.file("streamed/last.safetensors"));
  const io::WeightsFile b = io::load_safetensors(dir.file("memory/last.safetensors"));
  ASSERT_EQ(a.spans.size(), b.spans.size());
  for (const auto& span : a.spans) {
    if (span.name == "optimizer.step") continue;
    const Tensor x = a.get(span.name).contiguous(), y = b.get(span.name).contiguous();
    ASSERT_EQ(x.shape(), y.shape()) << span.name;
    if (span.dtype != "F32") continue;
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.data<float>()[i], y.data<float>()[i]) << span.name;
  }
  // vit eval streams too and scores the same.
  const std::string model = dir.file("memory/last.safetensors");
  const CommandResult e1 = vit("eval --checkpoint " + model + " --data " + data + " --data-residency stream --json");
  const CommandResult e2 = vit("eval --checkpoint " + model + " --data " + data + " --data-residency memory --json");
  ASSERT_EQ(e1.exit_code, 0) << e1.out;
  ASSERT_EQ(e2.exit_code, 0) << e2.out;
  const nlohmann::json j1 = nlohmann::json::parse(e1.out), j2 = nlohmann::json::parse(e2.out);
  EXPECT_EQ(j1["images"], 20) << e1.out;
  ASSERT_TRUE(j1["loss"].is_number() && j1["top1"].is_number()) << e1.out;
  EXPECT_EQ(j1["loss"], j2["loss"]) << e1.out << e2.out;
  EXPECT_EQ(j1["top1"], j2["top1"]) << e1.out << e2.out;
  // Bad values are refused, naming the flag.
  const CommandResult bad =
      vit("train --data " + data + " --out " + dir.file("bad") + kStreamTiny + " --steps 1 --data-residency disk");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--data-residency"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir.file("bad/last.safetensors")));
  const CommandResult threads = vit("eval --checkpoint " + model + " --data " + data + " --loader-threads -1");
  EXPECT_NE(threads.exit_code, 0);
  EXPECT_NE(threads.out.find("--loader-threads must be in [0, 256], got -1"), std::string::npos) << threads.out;
  const CommandResult many =
      vit("train --data " + data + " --out " + dir.file("bad") + kStreamTiny + " --steps 1 --loader-threads 100000");
  EXPECT_NE(many.exit_code, 0);
  EXPECT_NE(many.out.find("--loader-threads must be in [0, 256], got 100000"), std::string::npos) << many.out;
  EXPECT_FALSE(fs::exists(dir.file("bad/last.safetensors")));
  const CommandResult residency = vit("eval --checkpoint " + model + " --data " + data + " --data-residency disk");
  EXPECT_NE(residency.exit_code, 0);
  EXPECT_NE(residency.out.find("--data-residency: must be one of auto, memory, stream, got 'disk'"), std::string::npos)
      << residency.out;
}

// vit eval scores each photo of a folder as vit predict classifies it (the model's evaluation
// transform, not a squash): its top-1 accuracy is the share of vit predict's answers that are right.
TEST(StreamedDataCli, EvalScoresEachPhotoAsVitPredictClassifiesIt) {
  TempDir dir;
  const std::string data = streamed_photo_folders(dir);
  const CommandResult run = vit("train --data " + data + " --out " + dir.file("run") + kStreamTiny + " --epochs 1");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string model = dir.file("run/last.safetensors");
  const CommandResult e = vit("eval --checkpoint " + model + " --data " + data + " --json");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  std::string images;
  std::vector<std::string> truth;
  for (const char* cls : {"a", "b"}) {
    for (int i = 0; i < 10; ++i) {
      images += " " + data + "/test/" + cls + "/" + std::to_string(i) + ".jpg";
      truth.emplace_back(cls);
    }
  }
  const CommandResult p = vit("predict --checkpoint " + model + " --top-k 1" + images);
  ASSERT_EQ(p.exit_code, 0) << p.out;
  // Each image's line, then "   NN.NN%  CLASS".
  std::istringstream lines(p.out);
  std::vector<std::string> answers;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("   ", 0) == 0 && line.find('%') != std::string::npos)
      answers.push_back(line.substr(line.rfind(' ') + 1));
  }
  ASSERT_EQ(answers.size(), truth.size()) << p.out;
  int right = 0;
  for (size_t i = 0; i < truth.size(); ++i) right += answers[i] == truth[i];
  const nlohmann::json j = nlohmann::json::parse(e.out);
  EXPECT_DOUBLE_EQ(j["top1"].get<double>(), right / 20.0) << e.out << p.out;
  // vit info says the transform eval and predict apply.
  const CommandResult info = vit("info --checkpoint " + model);
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("  preprocessing (vit eval, predict, serve): resize "), std::string::npos) << info.out;
  // --crop that does not give the model's size: refused, naming the photo.
  const CommandResult crop = vit("eval --checkpoint " + model + " --data " + data + " --resize 32 --crop 20");
  EXPECT_NE(crop.exit_code, 0);
  EXPECT_NE(crop.out.find("shaped to 3x20x20, not the 3x28x28 of the dataset"), std::string::npos) << crop.out;
}

// --rrc-scale: timm's random resized crop, from the original photos of a streamed folder; recorded
// in the checkpoint (a resumed run keeps it); out-of-range values and --no-augment beside it refused.
TEST(StreamedDataCli, RandomResizedCropTrainsFromTheOriginalPhotos) {
  TempDir dir;
  const std::string data = streamed_photo_folders(dir);
  const CommandResult r = vit("train --data " + data + " --out " + dir.file("rrc") + kStreamTiny +
                              " --steps 3 --data-residency stream --rrc-scale 0.08 --hflip");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const io::WeightsFile f = io::load_safetensors(dir.file("rrc/last.safetensors"));
  EXPECT_NE(f.metadata.at("train_config").find("\"rrc_scale\":0.08"), std::string::npos)
      << f.metadata.at("train_config");
  const CommandResult big =
      vit("train --data " + data + " --out " + dir.file("bad1") + kStreamTiny + " --steps 1 --rrc-scale 1.5");
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.out.find("--rrc-scale must be in [0, 1]"), std::string::npos) << big.out;
  const CommandResult off = vit("train --data " + data + " --out " + dir.file("bad2") + kStreamTiny +
                                " --steps 1 --rrc-scale 0.5 --no-augment");
  EXPECT_NE(off.exit_code, 0);
  EXPECT_NE(off.out.find("--rrc-scale"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace vit
