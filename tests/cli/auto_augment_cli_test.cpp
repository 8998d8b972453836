// `vit train --auto-augment` as a user types it: TrivialAugmentWide and RandAugment train (on a
// streamed folder, whose summary gives the loader's share of the run), are recorded in the run's
// config (a resumed run keeps them), and bad policy strings are refused naming the flag, as is the
// policy together with --no-augment.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::TempDir;
using testing::vit;

TEST(AutoAugmentCli, PoliciesTrainAreRecordedAndBadOnesAreRefused) {
  TempDir dir;
  testing::write_photo_folder(dir.file("photos"), 2, 6, 2, 20, 24, "png");
  const std::string common =
      " --data " + dir.file("photos") +
      " --preset vit_digits --channels 3 --image-size 16 --patch-size 8 --batch-size 4 --threads 1 "
      "--plain";
  for (const char* policy : {"ta_wide", "rand-m9-n2"}) {
    const std::string out = dir.file(std::string("run_") + policy);
    const CommandResult r =
        vit("train" + common + " --epochs 1 --data-residency stream --auto-augment " + policy + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // A streamed run's summary gives the loader's share of the whole run.
    EXPECT_NE(r.out.find("data: over the run the steps waited "), std::string::npos) << r.out;
    const auto metadata = io::load_safetensors(out + "/last.safetensors").metadata;
    EXPECT_NE(metadata.at("train_config").find(std::string("\"auto_augment\":\"") + policy + "\""), std::string::npos)
        << metadata.at("train_config");
    const CommandResult shown = vit("info --checkpoint " + out + "/last.safetensors");
    // vit_digits's own (rotate, shift, zoom), then the policy.
    EXPECT_NE(shown.out.find(std::string("training augmentation (the run's): rotate up to 8 degrees, shift up to "
                                         "0.08, zoom 0.92-1.08, ") +
                             policy + "\n"),
              std::string::npos)
        << shown.out;
    const CommandResult more = vit("train --resume " + out + " --epochs 2 --plain --threads 1");
    EXPECT_EQ(more.exit_code, 0) << more.out;
  }
  const CommandResult bad =
      vit("train" + common + " --steps 1 --auto-augment rand-m9-mstd0.5 --out " + dir.file("bad"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--auto-augment 'rand-m9-mstd0.5': give ta_wide"), std::string::npos) << bad.out;
  const CommandResult off =
      vit("train" + common + " --steps 1 --auto-augment ta_wide --no-augment --out " + dir.file("off"));
  EXPECT_NE(off.exit_code, 0);
  EXPECT_NE(off.out.find("--auto-augment"), std::string::npos) << off.out;
}

}  // namespace
}  // namespace vit
