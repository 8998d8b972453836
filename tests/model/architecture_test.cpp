// model/architecture.h describes every parameter without building the model: for every variant
// of the config (cls/mean pooling, qkv bias on/off, a representation layer, an explicit MLP
// width, depth 1 to 3, a convolutional stem of 1 or 2 layers, a hybrid's ResNet backbone) its table must equal the
// built VisionTransformer's named_parameters() name for name and shape for shape, and the counts and MACs read from it
// must equal the closed formulas they replaced. The checkpoint layouts' timm keys must be the same names.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "model/layouts/config_from_shapes.h"
#include "model/layouts/layout.h"
#include "model/vision_transformer.h"
#include "support/variants.h"

namespace vit::model {
namespace {

// A hybrid's backbone (model/backbone.h): parameters, or (macs) multiply-accumulates per image.
double formula_backbone(const ViTConfig& c, bool macs) {
  if (!c.hybrid()) return 0.0;
  const double C0 = static_cast<double>(c.conv_channels);
  const double image = static_cast<double>(c.image_size / c.conv_stem_stride);
  auto conv = [&](double out, double in, double k, double side) {
    return macs ? out * in * k * k * side * side : out * in * k * k + 2 * out;
  };
  double n = conv(C0, static_cast<double>(c.in_channels), 3, image), in = C0;
  for (int64_t s = 0; s < c.conv_stages; ++s) {
    const double out = C0 * static_cast<double>(int64_t{1} << s), side = image / static_cast<double>(int64_t{1} << s);
    for (int64_t b = 0; b < c.conv_blocks; ++b) {
      n += conv(out, in, 3, side) + conv(out, out, 3, side) + (in != out ? conv(out, in, 1, side) : 0.0);
      in = out;
    }
  }
  return n;
}

// The closed formulas that stood in vision_transformer.cpp before the parameter table.
double formula_parameter_count(const ViTConfig& c) {
  const double D = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim()),
               P = static_cast<double>(c.patch_size), C = static_cast<double>(c.in_channels),
               N = static_cast<double>(c.num_tokens()), K = static_cast<double>(c.num_classes),
               R = static_cast<double>(c.representation_size);
  const double S = static_cast<double>(c.stem_channels), E = static_cast<double>(c.embed_channels());
  const double EP = static_cast<double>(c.embed_patch());
  double n = D * E * EP * EP + D + N * D + (c.pool == "cls" ? D : 0.0);
  (void)P;
  n += formula_backbone(c, false);
  if (c.stem_layers > 0) n += (C * S * 9 + S) + static_cast<double>(c.stem_layers - 1) * (S * S * 9 + S);
  const double block = 4 * D + 3 * D * D + (c.qkv_bias ? 3 * D : 0.0) + D * D + D + D * F + F + F * D + D;
  n += static_cast<double>(c.depth) * block + 2 * D;
  if (c.representation_size > 0) n += D * R + R;
  n += (c.representation_size > 0 ? R : D) * K + K;
  return n;
}

ComputeCost formula_macs(const ViTConfig& c) {
  const int64_t N = c.num_tokens(), D = c.dim, F = c.hidden_dim();
  ComputeCost cost;
  cost.patch_embed = c.num_patches() * D * c.embed_channels() * c.embed_patch() * c.embed_patch();
  const int64_t pixels = c.image_size * c.image_size, S = c.stem_channels;
  if (c.stem_layers > 0) cost.stem = pixels * 9 * S * (c.in_channels + (c.stem_layers - 1) * S);
  cost.stem += static_cast<int64_t>(formula_backbone(c, true));
  cost.attention = c.depth * (N * D * 3 * D + 2 * N * N * D + N * D * D);
  cost.mlp = c.depth * (2 * N * D * F);
  const int64_t features = c.representation_size > 0 ? c.representation_size : D;
  cost.head = (c.representation_size > 0 ? D * c.representation_size : 0) + features * c.num_classes;
  return cost;
}

// The per-part walk over a built model that parameters_by_part replaced.
std::vector<std::pair<std::string, int64_t>> parts_of_built(const VisionTransformer& model) {
  std::vector<std::pair<std::string, int64_t>> parts;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::string part = name.substr(0, name.find('.'));
    if (parts.empty() || parts.back().first != part) parts.emplace_back(part, 0);
    parts.back().second += p.numel();
  }
  return parts;
}

std::vector<ViTConfig> variants() {
  std::vector<ViTConfig> configs;
  for (const char* name : {"vit_digits", "vit_fashion", "vit_cifar"}) configs.push_back(preset(name));
  for (int64_t stem_layers : {1, 2}) {  // the hybrid: a convolutional stem before the patch embedding
    ViTConfig c = preset("vit_cifar");
    c.stem_layers = stem_layers;
    c.stem_channels = 6;
    c.name = fmt::format("vit_cifar stem_layers={}", stem_layers);
    configs.push_back(c);
  }
  // The hybrid: ResNet stages with BatchNorm; 1x1 patches of the last map, or 7x7 of a 14x14 one.
  for (auto [stages, blocks, patch, stem_stride] :
       {std::tuple{3, 2, 4, 1}, {2, 1, 14, 1}, {1, 1, 7, 1}, {2, 1, 4, 2}}) {
    ViTConfig c = preset("vit_fashion");
    c.stem_layers = 0;
    c.stem_channels = 0;
    c.conv_stages = stages;
    c.conv_channels = 6;
    c.conv_blocks = blocks;
    c.patch_size = patch;
    c.conv_stem_stride = stem_stride;
    c.name = fmt::format("hybrid stages={} blocks={} patch={} stem stride={}", stages, blocks, patch, stem_stride);
    configs.push_back(c);
  }
  for (const char* pool : {"cls", "mean"}) {
    for (bool qkv_bias : {true, false}) {
      for (int64_t representation : {0, 12}) {
        for (int64_t mlp_dim : {0, 20}) {
          for (int64_t depth : {1, 2, 3}) {
            ViTConfig c;
            c.image_size = 12;
            c.patch_size = 4;
            c.in_channels = 2;
            c.num_classes = 5;
            c.dim = 16;
            c.num_heads = 2;
            c.mlp_ratio = 1.5;
            c.pool = pool;
            c.qkv_bias = qkv_bias;
            c.representation_size = representation;
            c.mlp_dim = mlp_dim;
            c.depth = depth;
            c.name = fmt::format("{} qkv_bias={} representation={} mlp_dim={} depth={}", pool, qkv_bias, representation,
                                 mlp_dim, depth);
            configs.push_back(c);
          }
        }
      }
    }
  }
  return configs;
}

TEST(Architecture, TableEqualsTheBuiltModelForEveryVariant) {
  for (const ViTConfig& c : variants()) {
    SCOPED_TRACE(c.name);
    const VisionTransformer model(c, std::make_shared<Generator>(0));
    const auto built = model.named_parameters();
    const std::vector<ParameterSpec> specs = parameter_specs(c);
    ASSERT_EQ(specs.size(), built.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(specs[i].name, built[i].first) << "parameter " << i;
      EXPECT_EQ(specs[i].shape, built[i].second.shape()) << specs[i].name;
    }
    EXPECT_EQ(parameter_count(c), static_cast<double>(model.num_parameters()));
    EXPECT_EQ(parameter_count(c), formula_parameter_count(c));
    // The buffers (a hybrid's BatchNorm statistics) likewise, and the state dict's total.
    const auto buffers = model.named_buffers();
    const std::vector<ParameterSpec> buffer_table = buffer_specs(c);
    ASSERT_EQ(buffer_table.size(), buffers.size());
    double state = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_EQ(buffer_table[i].name, buffers[i].first);
      EXPECT_EQ(buffer_table[i].shape, buffers[i].second.shape()) << buffers[i].first;
    }
    for (const auto& [_, t] : model.state_dict()) state += static_cast<double>(t.numel());
    EXPECT_EQ(state_count(c), state);
    EXPECT_EQ(c.hybrid(), !buffers.empty());
    EXPECT_EQ(parameters_by_part(c), parts_of_built(model));
    if (c.depth > 0) {
      EXPECT_EQ(parameters_per_block(c), model.blocks->named_children()[0].second->num_parameters());
    }
    const ComputeCost macs = macs_per_image(c), formula = formula_macs(c);
    EXPECT_EQ(macs.stem, formula.stem);
    EXPECT_EQ(macs.patch_embed, formula.patch_embed);
    EXPECT_EQ(macs.attention, formula.attention);
    EXPECT_EQ(macs.mlp, formula.mlp);
    EXPECT_EQ(macs.head, formula.head);
  }
}

TEST(Architecture, TableEqualsTheBuiltModelForEveryDescendant) {
  for (const ViTConfig& c : testing::descendant_variants()) {
    SCOPED_TRACE(c.name);
    c.validate();
    const VisionTransformer model(c, std::make_shared<Generator>(0));
    const auto built = model.named_parameters();
    const std::vector<ParameterSpec> specs = parameter_specs(c);
    ASSERT_EQ(specs.size(), built.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(specs[i].name, built[i].first) << "parameter " << i;
      EXPECT_EQ(specs[i].shape, built[i].second.shape()) << specs[i].name;
    }
    EXPECT_EQ(parameter_count(c), static_cast<double>(model.num_parameters()));
    EXPECT_EQ(parameters_by_part(c), parts_of_built(model));
    EXPECT_EQ(parameters_per_block(c), model.blocks->named_children()[0].second->num_parameters());
    // The config survives its JSON, and the shapes of its weights tell it again.
    EXPECT_TRUE(ViTConfig::from_json(c.to_json()).same_architecture(c));
  }
}

// timm's parameter counts (timm.create_model(name).num_parameters(), with the pretrained
// weights' class counts: 1000, none for DINOv2, the projection width for CLIP).
TEST(Architecture, TimmCountsOfTheDescendants) {
  const std::pair<const char*, double> counts[] = {
      {"deit_tiny_distilled_patch16_224", 5910800},  {"deit_small_distilled_patch16_224", 22436432},
      {"deit_base_distilled_patch16_224", 87338192}, {"deit3_small_patch16_224", 22059496},
      {"deit3_base_patch16_224", 86585320},          {"vit_small_patch14_dinov2", 22056192},
      {"vit_base_patch14_dinov2", 86579712},         {"vit_small_patch14_reg4_dinov2", 22057344},
      {"vit_base_patch14_reg4_dinov2", 86582016},    {"vit_base_patch16_clip_224", 86193152},
      {"vit_base_patch32_clip_224", 87849728},       {"vit_large_patch14_clip_224", 303966976},
  };
  for (const auto& [name, count] : counts) EXPECT_EQ(parameter_count(preset(name)), count) << name;
}

TEST(Architecture, LargePresetsWithoutBuildingThem) {
  const ViTConfig b16 = preset("vit_base_patch16_224");
  EXPECT_EQ(parameter_count(b16), 86567656.0);  // timm's count
  const ComputeCost cost = macs_per_image(b16);
  EXPECT_EQ(cost.patch_embed, 115605504);
  EXPECT_EQ(cost.attention, 6292703232);
  EXPECT_EQ(cost.mlp, 11154751488);
  EXPECT_EQ(cost.head, 768000);
  EXPECT_EQ(cost.total(), 17563828224);  // 17.56 GMACs
  const std::vector<std::pair<std::string, int64_t>> parts = {{"cls_token", 768},      {"pos_embed", 151296},
                                                              {"patch_embed", 590592}, {"blocks", 85054464},
                                                              {"norm", 1536},          {"head", 769000}};
  EXPECT_EQ(parameters_by_part(b16), parts);
  EXPECT_EQ(parameters_per_block(b16), 7087872);
  for (const char* name :
       {"vit_tiny_patch16_224", "vit_small_patch16_224", "vit_base_patch16_224", "vit_large_patch16_224"}) {
    const ViTConfig c = preset(name);
    EXPECT_EQ(parameter_count(c), formula_parameter_count(c)) << name;
    EXPECT_EQ(macs_per_image(c).total(), formula_macs(c).total()) << name;
  }
  // A depth no one could build is still counted (once per block, not expanded).
  ViTConfig deep = preset("vit_digits");
  deep.depth = int64_t{1} << 40;
  EXPECT_EQ(parameter_count(deep), formula_parameter_count(deep));
}

TEST(Architecture, CheckpointLayoutsNameTheSameParameters) {
  ViTConfig c = preset("vit_tiny_patch16_224");  // cls pooling
  c.representation_size = 8;
  const ArchitectureSpec spec = architecture_spec(c);
  std::vector<std::string> block;
  for (const ParameterSpec& p : spec.block) block.push_back(p.name);
  std::vector<std::string> keys;
  for (const KeyNames& k : block_keys()) keys.push_back(k.timm);
  EXPECT_EQ(keys, block) << "a block parameter without a row in block_keys(), or a row for none";
  std::vector<std::string> top;
  for (const auto* part : {&spec.before_blocks, &spec.after_blocks}) {
    for (const ParameterSpec& p : *part) top.push_back(p.name);
  }
  keys.clear();
  for (const KeyNames& k : top_level_keys()) keys.push_back(k.timm);
  EXPECT_EQ(keys, top);
  // Every foreign key names one tensor.
  std::set<std::string> torchvision, huggingface;
  for (const auto* table : {&top_level_keys(), &block_keys()}) {
    for (const KeyNames& k : *table) {
      if (k.torchvision) {
        EXPECT_TRUE(torchvision.insert(k.torchvision).second) << k.torchvision;
      }
      if (k.huggingface) {
        EXPECT_TRUE(huggingface.insert(k.huggingface).second) << k.huggingface;
      }
    }
  }
}

// A checkpoint without its config (the timm layout) tells a stem by its stem.{2i}.weight keys.
TEST(Architecture, AConfiglessCheckpointTellsItsStem) {
  for (int64_t layers : {0, 1, 3}) {
    ViTConfig c = preset("vit_cifar");
    c.stem_layers = layers;
    c.stem_channels = layers > 0 ? 5 : 0;
    const VisionTransformer model(c, std::make_shared<Generator>(0));
    NamedTensors weights;
    for (const auto& [name, p] : model.named_parameters()) weights.emplace_back(name, p.data());
    const ViTConfig inferred = infer_config(weights, Layout::Timm, c.num_heads, "test");
    EXPECT_TRUE(inferred.same_architecture(c)) << layers << ": " << inferred.to_json();
    EXPECT_EQ(inferred.stem_layers, layers);
    EXPECT_EQ(inferred.in_channels, 3);
  }
}

}  // namespace
}  // namespace vit::model
