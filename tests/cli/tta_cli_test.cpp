// `vit eval --tta flip` as a user types it: the plain result stays the headline, the TTA one is
// printed beside it (text and --json), and an unknown mode is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::TempDir;
using testing::vit;

TEST(TtaCli, EvalReportsFlipBesideThePlainResult) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 192, 64);
  const CommandResult trained = vit("train --preset vit_digits --data " + dir.file("data") + " --out " +
                                    dir.file("run") + " --steps 6 --batch-size 32 --threads 1");
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  const std::string eval = "eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("data");
  const CommandResult plain = vit(eval + " --json");
  const CommandResult tta = vit(eval + " --json --tta flip");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  ASSERT_EQ(tta.exit_code, 0) << tta.out;
  const auto p = nlohmann::json::parse(plain.out.substr(plain.out.find('{')));
  const auto t = nlohmann::json::parse(tta.out.substr(tta.out.find('{')));
  EXPECT_FALSE(p.contains("tta"));
  EXPECT_EQ(t["top1"], p["top1"]);  // the headline is the plain single view either way
  EXPECT_EQ(t["loss"], p["loss"]);
  ASSERT_TRUE(t.contains("tta"));
  EXPECT_EQ(t["tta"]["mode"], "flip");
  EXPECT_NE(t["tta"]["loss"], p["loss"]);  // the mirrored view changed the probabilities
  EXPECT_GE(t["tta"]["top1"].get<double>(), 0.0);
  EXPECT_LE(t["tta"]["top1"].get<double>(), 1.0);
  const CommandResult text = vit(eval + " --tta flip");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("with test-time augmentation (flip): loss"), std::string::npos) << text.out;
  EXPECT_LT(text.out.find("loss "), text.out.find("with test-time augmentation"));  // plain first
  const CommandResult bad = vit(eval + " --tta mirror");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--tta"), std::string::npos) << bad.out;
}

// `vit train --tta flip`: a second summary line, the same number `vit eval --tta flip` gives for the
// weights the run evaluated; the plain accuracy stays the run's result.
TEST(TtaCli, TrainPrintsTheTtaLineBesideThePlainResult) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 192, 64);
  const CommandResult r = vit("train --preset vit_digits --data " + dir.file("data") + " --out " + dir.file("run") +
                              " --epochs 1 --batch-size 32 --threads 1 --tta flip");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t done = r.out.find("done: test accuracy"), line = r.out.find("with test-time augmentation (flip): ");
  ASSERT_NE(done, std::string::npos) << r.out;
  ASSERT_NE(line, std::string::npos) << r.out;
  EXPECT_LT(done, line);
  const double printed = std::stod(r.out.substr(r.out.find("test accuracy ", line) + 14));
  const CommandResult e = vit("eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("data") +
                              " --json --tta flip");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const auto j = nlohmann::json::parse(e.out.substr(e.out.find('{')));
  EXPECT_NEAR(printed, 100 * j["tta"]["top1"].get<double>(), 0.006);  // printed with 2 decimals
  const CommandResult bad = vit("train --data " + dir.file("data") + " --tta mirror");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("--tta"), std::string::npos) << bad.out;
}

// `vit train --ema D`: the EMA weights are the run's result, and the optimiser's own weights are
// evaluated once at the end and printed beside them (the number `vit eval --raw` gives); a run
// without EMA prints no such line.
TEST(TtaCli, TrainWithEmaPrintsTheRawWeightsBesideTheEmaResult) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 192, 64);
  const CommandResult r = vit("train --preset vit_digits --data " + dir.file("data") + " --out " + dir.file("run") +
                              " --epochs 2 --batch-size 32 --threads 1 --ema 0.9");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t done = r.out.find("done: test accuracy"),
               line = r.out.find("without EMA (the optimiser's own weights): ");
  ASSERT_NE(done, std::string::npos) << r.out;
  ASSERT_NE(line, std::string::npos) << r.out;
  EXPECT_LT(done, line);
  const double printed = std::stod(r.out.substr(r.out.find("test accuracy ", line) + 14));
  const std::string eval = "eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("data");
  const CommandResult raw = vit(eval + " --json --raw"), ema = vit(eval + " --json");
  ASSERT_EQ(raw.exit_code, 0) << raw.out;
  ASSERT_EQ(ema.exit_code, 0) << ema.out;
  const auto jr = nlohmann::json::parse(raw.out.substr(raw.out.find('{')));
  const auto je = nlohmann::json::parse(ema.out.substr(ema.out.find('{')));
  EXPECT_NEAR(printed, 100 * jr["top1"].get<double>(), 0.006);
  EXPECT_NE(jr["loss"], je["loss"]);  // two different sets of weights
  const double headline = std::stod(r.out.substr(done + 19));
  EXPECT_NEAR(headline, 100 * je["top1"].get<double>(), 0.006);  // the EMA result stays the headline
  const CommandResult plain = vit("train --preset vit_digits --data " + dir.file("data") + " --out " +
                                  dir.file("plain") + " --epochs 1 --batch-size 32 --threads 1 --ema 0");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("without EMA"), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace vit
