// The `vit` command given what a hostile new user gives it (issue 11): a model of depth 0 and a
// checkpoint that says depth 0 (refused by every command, never a crash).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "data/image.h"
#include "io/safetensors.h"
#include "run_vit.h"
#include "support/files.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

// A tiny model for 8x8 grey images, one epoch, one thread (no --depth: each test adds it).
const std::string kModel =
    " --image-size 8 --patch-size 4 --dim 8 --heads 2 --pool mean --epochs 1 --batch-size 4 --threads 1";

// Family 1. `vit train --depth 0` wrote a checkpoint and `vit attention` on it died of SIGSEGV.
// Depth 0 is refused by the config; a checkpoint saying depth 0 (as older versions wrote) is
// refused by every command that loads one.
TEST(HostileCli, DepthZeroIsRefusedByEveryCommand) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 8, 4, 8);
  const std::string refused = "[vit_config] dim 8, depth 0, num_heads 2 must be positive";
  expect_error(vit("train --data " + dir.file("data") + " --out " + dir.file("zero") + kModel + " --depth 0"), refused);
  EXPECT_FALSE(fs::exists(dir.file("zero")));

  const CommandResult ok = vit("train --data " + dir.file("data") + " --out " + dir.file("run") + kModel + " --depth 1");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  const io::SafetensorsFile file = io::load_safetensors(dir.file("run/last.safetensors"));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : file.tensors) {
    if (name.find("blocks.") == std::string::npos) tensors.emplace_back(name, t);
  }
  std::map<std::string, std::string> metadata = file.metadata;
  auto config = nlohmann::json::parse(metadata.at("model_config"));
  config["depth"] = 0;
  metadata["model_config"] = config.dump();
  const std::string forged = dir.file("depth0.safetensors");
  io::save_safetensors(forged, tensors, metadata);
  data::write_png(dir.file("x.png"), data::Image{1, 8, 8, std::vector<uint8_t>(64, 50)});

  const std::string bad = "[checkpoint] " + forged + ": " + refused;
  expect_error(vit("attention --checkpoint " + forged + " --out " + dir.file("a.png") + " " + dir.file("x.png")), bad);
  EXPECT_FALSE(fs::exists(dir.file("a.png")));
  expect_error(vit("predict --checkpoint " + forged + " " + dir.file("x.png")), bad);
  expect_error(vit("eval --checkpoint " + forged + " --data " + dir.file("data")), bad);
  expect_error(vit("info --checkpoint " + forged), bad);
  // The unforged checkpoint still draws its attention.
  const CommandResult drawn =
      vit("attention --checkpoint " + dir.file("run/last.safetensors") + " --out " + dir.file("a.png") + " " +
          dir.file("x.png"));
  EXPECT_EQ(drawn.exit_code, 0) << drawn.out;
  EXPECT_TRUE(fs::exists(dir.file("a.png")));
}

}  // namespace
}  // namespace vit
