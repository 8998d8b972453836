// The size estimates used to refuse what cannot fit: parameter_count must equal the built
// model's count, and the memory estimate must grow the way the model does.
#include <gtest/gtest.h>

#include "core/system.h"
#include "model/vision_transformer.h"

namespace vit::model {
namespace {

TEST(MemoryEstimate, ParameterCountMatchesTheBuiltModel) {
  std::vector<ViTConfig> configs;
  for (const char* name : {"vit_digits", "vit_cifar", "vit_tiny_patch16_224"}) configs.push_back(preset(name));
  ViTConfig c = preset("vit_digits");
  c.pool = "cls";
  c.qkv_bias = false;
  c.representation_size = 24;
  c.mlp_dim = 50;
  c.num_classes = 7;
  configs.push_back(c);
  for (const ViTConfig& config : configs) {
    const VisionTransformer model(config, std::make_shared<Generator>(0));
    EXPECT_EQ(parameter_count(config), static_cast<double>(model.num_parameters())) << config.name;
  }
  // Large presets without building them (the counts timm reports).
  EXPECT_EQ(parameter_count(preset("vit_base_patch16_224")), 86567656.0);
  EXPECT_EQ(parameter_count(preset("vit_large_patch16_224")), 304326632.0);
}

TEST(MemoryEstimate, GrowsWithBatchAndTrainingCostsMore) {
  const ViTConfig b16 = preset("vit_base_patch16_224");
  const MemoryEstimate one = memory_estimate(b16, 1, false), eight = memory_estimate(b16, 8, false);
  EXPECT_DOUBLE_EQ(one.weights, 4.0 * 86567656.0);
  EXPECT_DOUBLE_EQ(eight.activations, 8 * one.activations);
  EXPECT_EQ(one.training_state, 0.0);
  const MemoryEstimate train = memory_estimate(b16, 1, true);
  EXPECT_DOUBLE_EQ(train.training_state, 4 * train.weights);
  EXPECT_GT(train.activations, 5 * one.activations) << "training keeps every block's activations";
  // ViT-B/16 batch-1 inference: weights dominate (about 330 MiB), activations are small.
  EXPECT_LT(one.activations, 0.2 * one.weights);
}

TEST(MemoryEstimate, RefusesWhatCannotFitBeforeAllocating) {
  ViTConfig huge = preset("vit_base_patch16_224");
  huge.dim = 1 << 20;
  huge.num_heads = 1;
  try {
    check_memory(huge, 1, false);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[memory] running vit_base_patch16_224 with batch 1 (weights "), std::string::npos) << what;
    EXPECT_NE(what.find(" but this machine has " + bytes_str(static_cast<double>(memory_limit_bytes()))),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(VisionTransformer(huge, std::make_shared<Generator>(0)), Error);  // the constructor refuses too
  EXPECT_NO_THROW(check_memory(preset("vit_digits"), 64, true));
}

TEST(MemoryEstimate, BytesForMessages) {
  EXPECT_EQ(bytes_str(1536), "2 KiB");
  EXPECT_EQ(bytes_str(3.5 * 1024 * 1024), "3.5 MiB");
  EXPECT_EQ(bytes_str(24.0 * 1024 * 1024 * 1024), "24.0 GiB");
}

}  // namespace
}  // namespace vit::model
