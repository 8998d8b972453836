// Models a hostile new user can reach: depth 0 (refused by the config, so no command can build
// one, and a checkpoint that says so fails to load instead of crashing `vit attention`),
// attention maps of a model without blocks (an error, not a crash), and a checkpoint trained on
// fewer classes than it has outputs (every output gets a name, so no lookup runs off the list).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "infer/attention_map.h"
#include "infer/load_model.h"
#include "io/safetensors.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::infer {
namespace {

using testing::error_of;

model::ViTConfig tiny() {
  model::ViTConfig c;
  c.name = "tiny";
  c.image_size = 8;
  c.patch_size = 4;
  c.in_channels = 1;
  c.num_classes = 5;
  c.dim = 8;
  c.depth = 1;
  c.num_heads = 2;
  c.pool = "mean";
  return c;
}

void save_tiny(const std::string& path, const std::vector<std::string>& class_names) {
  const model::VisionTransformer model(tiny(), std::make_shared<Generator>(1));
  checkpoint::CheckpointInfo info;
  info.model = tiny();
  info.train_config_json = "{}";
  info.class_names = class_names;
  info.normalization = {{0.5}, {0.5}};
  checkpoint::save_checkpoint(path, model, info);
}

// A checkpoint as an older vit (which accepted --depth 0) wrote it: depth 0, no blocks.
void forge_depth_zero(const std::string& from, const std::string& to) {
  const io::WeightsFile file = io::load_safetensors(from);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("blocks.", 0) != 0) tensors.emplace_back(name, t);
  }
  std::map<std::string, std::string> metadata = file.metadata;
  auto config = nlohmann::json::parse(metadata.at("model_config"));
  config["depth"] = 0;
  metadata["model_config"] = config.dump();
  io::save_safetensors(to, tensors, metadata);
}

TEST(HostileModel, DepthZeroIsRefusedEverywhere) {
  model::ViTConfig c = tiny();
  c.depth = 0;
  EXPECT_EQ(error_of([&] { c.validate(); }), "[vit_config] dim 8, depth 0, num_heads 2 must be positive");
  EXPECT_EQ(error_of([&] { model::VisionTransformer(c, std::make_shared<Generator>(0)); }),
            "[vit_config] dim 8, depth 0, num_heads 2 must be positive");
  testing::TempDir dir;
  save_tiny(dir.file("ok.safetensors"), {"a", "b", "c", "d", "e"});
  forge_depth_zero(dir.file("ok.safetensors"), dir.file("depth0.safetensors"));
  const std::string expected = "[checkpoint] " + dir.file("depth0.safetensors") +
                               ": model_config: [vit_config] dim 8, depth 0, num_heads 2 must be positive";
  EXPECT_EQ(error_of([&] { checkpoint::load_checkpoint(dir.file("depth0.safetensors")); }), expected);
  EXPECT_EQ(error_of([&] { load_model(dir.file("depth0.safetensors")); }), expected);
}

// attention_maps checks the model it is given rather than trusting it has blocks (it crashed
// on a model without any).
TEST(HostileModel, AttentionMapsOfAModelWithoutBlocksIsAnError) {
  model::VisionTransformer model(tiny(), std::make_shared<Generator>(0));
  const data::Image image{1, 8, 8, std::vector<uint8_t>(64, 100)};
  Preprocess p;
  p.resize = 8;
  p.square = true;
  p.crop = 0;
  p.mean = {0.5};
  p.std = {0.5};
  const AttentionMaps maps = attention_maps(model, image, p);
  EXPECT_EQ(maps.grid, 2);
  EXPECT_EQ(maps.rollout.size(), 4u);
  model.blocks = std::make_shared<nn::Sequential>();  // what the forward runs: no blocks at all
  EXPECT_EQ(error_of([&] { attention_maps(model, image, p); }),
            "[attention] tiny has no encoder blocks: there is no attention to draw");
}

// Trained on 3 class folders with 5 outputs: predict / attention name the 2 unused outputs by
// number instead of reading past the end of the names.
TEST(HostileModel, EveryOutputHasAClassName) {
  testing::TempDir dir;
  save_tiny(dir.file("three.safetensors"), {"ant", "bee", "cat"});
  const LoadedModel m = load_model(dir.file("three.safetensors"));
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"ant", "bee", "cat", "3", "4"}));
}

}  // namespace
}  // namespace vit::infer
