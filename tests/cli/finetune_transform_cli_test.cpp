// A fine-tuning run keeps the --init model's evaluation transform (issue 43): its checkpoints
// record the file's resize / crop / filter (at the run's image size, with the run's
// normalisation) instead of a squash, the run scores an image folder's test split shaped by it,
// and `vit eval` of the result on the same folder gives the run's own accuracy.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::TempDir;
using testing::vit;

nlohmann::json recorded_transform(const std::string& file) {
  const auto metadata = io::load_safetensors(file).metadata;
  const auto it = metadata.find("preprocess");
  return it == metadata.end() ? nlohmann::json() : nlohmann::json::parse(it->second);
}

TEST(FinetuneTransform, TheInitModelsEvaluationTransformIsKeptAndUsed) {
  TempDir dir;
  // The init file: RGB 32 px, evaluated as resize the shorter side to 36, centre crop 32, bicubic.
  testing::write_transform_checkpoint(dir.file("init.safetensors"));
  // Not square: a squash and a shorter-side resize + crop see different pixels.
  testing::write_photo_folder(dir.file("photos"), 2, 6, 5, 30, 50, "png");
  const std::string common = " --data " + dir.file("photos") + " --steps 3 --batch-size 4 --threads 1 --plain --ema 0";
  const CommandResult r = vit("train --init " + dir.file("init.safetensors") + common + " --out " + dir.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json p = recorded_transform(dir.file("run/last.safetensors"));
  ASSERT_TRUE(p.is_object()) << "no preprocess recorded";
  EXPECT_EQ(p["resize"], 36);
  EXPECT_EQ(p["crop"], 32);
  EXPECT_EQ(p["square"], false);
  EXPECT_EQ(p["filter"], "bicubic");
  const CommandResult shown = vit("info --checkpoint " + dir.file("run/last.safetensors"));
  EXPECT_NE(shown.out.find("bicubic"), std::string::npos) << shown.out;
  // The run's test accuracy is what vit eval of its checkpoint says on the same folder.
  const auto at = r.out.find("done: test accuracy ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string accuracy = r.out.substr(at + 20, r.out.find('%', at) - at - 20);
  const CommandResult e =
      vit("eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("photos") + " --threads 1");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find(accuracy + "%"), std::string::npos) << "run: " << accuracy << "%\n" << e.out;
  // Another image size: the crop follows it and the resize keeps its ratio (36/32 at 16: 18).
  const CommandResult small =
      vit("train --init " + dir.file("init.safetensors") + common + " --image-size 16 --out " + dir.file("small"));
  ASSERT_EQ(small.exit_code, 0) << small.out;
  const nlohmann::json q = recorded_transform(dir.file("small/last.safetensors"));
  EXPECT_EQ(q["resize"], 18);
  EXPECT_EQ(q["crop"], 16);
  // A resumed run keeps it.
  const std::string folder = " --data " + dir.file("photos") + " --batch-size 4 --threads 1 --plain --ema 0";
  ASSERT_EQ(
      vit("train --init " + dir.file("init.safetensors") + folder + " --epochs 1 --out " + dir.file("long")).exit_code,
      0);
  const CommandResult more = vit("train --resume " + dir.file("long") + " --epochs 2 --plain --threads 1");
  ASSERT_EQ(more.exit_code, 0) << more.out;
  EXPECT_EQ(recorded_transform(dir.file("long/last.safetensors"))["resize"], 36);
  // A run from scratch records none (its images are squashed to the size, as vit eval then does).
  const CommandResult scratch = vit("train --preset vit_digits --channels 3 --image-size 16 --patch-size 8" + common +
                                    " --out " + dir.file("scratch"));
  ASSERT_EQ(scratch.exit_code, 0) << scratch.out;
  EXPECT_TRUE(recorded_transform(dir.file("scratch/last.safetensors")).is_null());
}

}  // namespace
}  // namespace vit
