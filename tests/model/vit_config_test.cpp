// ViTConfig's JSON, as every checkpoint's "model_config" carries it: the text written today is
// pinned byte for byte (key order, number formatting), files written before the optional keys
// existed still load with the defaults, and bad JSON is refused naming the key.
#include "model/vit_config.h"

#include <gtest/gtest.h>

#include <set>

#include "core/check.h"

namespace vit::model {
namespace {

std::string error_of(const std::string& json) {
  try {
    ViTConfig::from_json(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ViTConfigJson, TextIsPinnedAndRoundTrips) {
  const std::string digits =
      R"({"name":"vit_digits","image_size":28,"patch_size":7,"in_channels":1,"num_classes":10,"dim":64,"depth":6,)"
      R"("num_heads":4,"mlp_ratio":2.0,"mlp_dim":0,"qkv_bias":true,"dropout":0.0,"attn_dropout":0.0,"drop_path":0.1,)"
      R"("pool":"mean","eps":1e-06,"representation_size":0,"stem_layers":0,"stem_channels":0)"
      R"(,"conv_stages":0,"conv_channels":0,"conv_blocks":0,"conv_stem_stride":1,"reg_tokens":0,"dist_token":false,"no_embed_class":false,"pre_norm":false,"final_norm":true,"act":"gelu",)"
      R"("layer_scale":0.0,"qk_norm":false,"dim_head":0,"mlp_layers":2,"norm_tokens":false,"head_tanh":false,)"
      R"("projection":false,"head_bias":true})";
  EXPECT_EQ(preset("vit_digits").to_json(), digits);
  const std::string base =
      R"({"name":"vit_base_patch16_224","image_size":224,"patch_size":16,"in_channels":3,"num_classes":1000,"dim":768,)"
      R"("depth":12,"num_heads":12,"mlp_ratio":4.0,"mlp_dim":0,"qkv_bias":true,"dropout":0.0,"attn_dropout":0.0,)"
      R"("drop_path":0.0,"pool":"cls","eps":1e-06,"representation_size":0,"stem_layers":0,"stem_channels":0)"
      R"(,"conv_stages":0,"conv_channels":0,"conv_blocks":0,"conv_stem_stride":1,"reg_tokens":0,"dist_token":false,"no_embed_class":false,"pre_norm":false,"final_norm":true,"act":"gelu",)"
      R"("layer_scale":0.0,"qk_norm":false,"dim_head":0,"mlp_layers":2,"norm_tokens":false,"head_tanh":false,)"
      R"("projection":false,"head_bias":true})";
  EXPECT_EQ(preset("vit_base_patch16_224").to_json(), base);
  ViTConfig c = preset("vit_base_patch16_224");
  c.name = "x \"q\"";
  c.mlp_dim = 50;
  c.qkv_bias = false;
  c.dropout = 0.1;
  c.attn_dropout = 0.25;
  c.eps = 1e-12;
  c.representation_size = 24;
  c.mlp_ratio = 2.5;
  c.stem_layers = 2;
  c.stem_channels = 16;
  const std::string custom =
      R"({"name":"x \"q\"","image_size":224,"patch_size":16,"in_channels":3,"num_classes":1000,"dim":768,"depth":12,)"
      R"("num_heads":12,"mlp_ratio":2.5,"mlp_dim":50,"qkv_bias":false,"dropout":0.1,"attn_dropout":0.25,)"
      R"("drop_path":0.0,"pool":"cls","eps":1e-12,"representation_size":24,"stem_layers":2,"stem_channels":16)"
      R"(,"conv_stages":0,"conv_channels":0,"conv_blocks":0,"conv_stem_stride":1,"reg_tokens":0,"dist_token":false,"no_embed_class":false,"pre_norm":false,"final_norm":true,"act":"gelu",)"
      R"("layer_scale":0.0,"qk_norm":false,"dim_head":0,"mlp_layers":2,"norm_tokens":false,"head_tanh":false,)"
      R"("projection":false,"head_bias":true})";
  EXPECT_EQ(c.to_json(), custom);
  for (const std::string& json : {digits, base, custom}) EXPECT_EQ(ViTConfig::from_json(json).to_json(), json);
}

TEST(ViTConfigJson, OldFilesWithoutTheOptionalKeysLoadWithDefaults) {
  // mlp_dim, dropout, attn_dropout, drop_path, representation_size, the stem and the options of
  // ViT's descendants (reg_tokens .. head_bias) came later.
  const ViTConfig c = ViTConfig::from_json(
      R"({"name":"a","image_size":28,"patch_size":7,"in_channels":1,"num_classes":10,"dim":64,"depth":1,)"
      R"("num_heads":4,"mlp_ratio":2.0,"qkv_bias":true,"pool":"mean","eps":1e-6})");
  EXPECT_EQ(
      c.to_json(),
      R"({"name":"a","image_size":28,"patch_size":7,"in_channels":1,"num_classes":10,"dim":64,"depth":1,)"
      R"("num_heads":4,"mlp_ratio":2.0,"mlp_dim":0,"qkv_bias":true,"dropout":0.0,"attn_dropout":0.0,)"
      R"("drop_path":0.0,"pool":"mean","eps":1e-06,"representation_size":0,"stem_layers":0,"stem_channels":0)"
      R"(,"conv_stages":0,"conv_channels":0,"conv_blocks":0,"conv_stem_stride":1,"reg_tokens":0,"dist_token":false,"no_embed_class":false,"pre_norm":false,"final_norm":true,"act":"gelu",)"
      R"("layer_scale":0.0,"qk_norm":false,"dim_head":0,"mlp_layers":2,"norm_tokens":false,"head_tanh":false,)"
      R"("projection":false,"head_bias":true})");
}

TEST(ViTConfigJson, BadJsonNamesTheKey) {
  const std::string prefix = "[vit_config] invalid model config JSON: [json.exception.";
  EXPECT_EQ(error_of("{}"), prefix + "out_of_range.403] key 'name' not found");
  EXPECT_EQ(error_of("[1]"), prefix + "type_error.304] cannot use at() with array");
  EXPECT_EQ(error_of("3"), prefix + "type_error.304] cannot use at() with number");
  EXPECT_EQ(error_of(R"({"name": 3})"), prefix + "type_error.302] type must be string, but is number");
  EXPECT_EQ(error_of("not json"), prefix +
                                      "parse_error.101] parse error at line 1, column 2: syntax error while parsing "
                                      "value - invalid literal; last read: 'no'");
  const std::string no_eps =
      R"({"name":"a","image_size":28,"patch_size":7,"in_channels":1,"num_classes":10,"dim":64,"depth":1,)"
      R"("num_heads":4,"mlp_ratio":2.0,"qkv_bias":true,"pool":"mean")";
  EXPECT_EQ(error_of(no_eps + "}"), prefix + "out_of_range.403] key 'eps' not found");
  // An optional key that is present must have the right type.
  EXPECT_EQ(error_of(no_eps + R"(,"eps":1e-6,"mlp_dim":"x"})"),
            prefix + "type_error.302] type must be number, but is string");
  // Valid JSON of an invalid model: the validation's message.
  std::string patch5 = no_eps + R"(,"eps":1e-6})";
  patch5.replace(patch5.find(R"("patch_size":7)"), 14, R"("patch_size":5)");
  EXPECT_EQ(error_of(patch5), "[vit_config] image_size 28 is not divisible by patch_size 5");
  const std::string valid = no_eps + R"(,"eps":1e-6)";
  EXPECT_EQ(error_of(valid + R"(,"stem_layers":1})"),
            "[vit_config] stem_channels 0 with stem_layers 1: a stem needs 1..4096 channels, no stem needs 0");
  EXPECT_EQ(error_of(valid + R"(,"stem_channels":8})"),
            "[vit_config] stem_channels 8 with stem_layers 0: a stem needs 1..4096 channels, no stem needs 0");
  EXPECT_EQ(error_of(valid + R"(,"stem_layers":9,"stem_channels":8})"),
            "[vit_config] stem_layers must be in [0, 8], got 9");
  EXPECT_EQ(error_of(valid + R"(,"stem_layers":-1,"stem_channels":8})"),
            "[vit_config] stem_layers must be in [0, 8], got -1");
  EXPECT_EQ(error_of(valid + R"(,"stem_layers":1,"stem_channels":5000})"),
            "[vit_config] stem_channels 5000 with stem_layers 1: a stem needs 1..4096 channels, no stem needs 0");
  EXPECT_EQ(ViTConfig::from_json(valid + R"(,"stem_layers":1,"stem_channels":8})").embed_channels(), 8);
  // A hybrid's backbone: three stages of 16, 32, 64 channels reach a 7x7 map of the 28x28 image.
  std::string hybrid = valid;
  hybrid.replace(hybrid.find(R"("patch_size":7)"), 14, R"("patch_size":4)");
  const ViTConfig h = ViTConfig::from_json(hybrid + R"(,"conv_stages":3,"conv_channels":16,"conv_blocks":1})");
  EXPECT_EQ(h.embed_channels(), 64);
  EXPECT_EQ(h.feature_stride(), 4);
  EXPECT_EQ(h.embed_patch(), 1);
  EXPECT_EQ(h.num_patches(), 49);
  EXPECT_EQ(error_of(hybrid + R"(,"conv_stages":6,"conv_channels":16,"conv_blocks":1})"),
            "[vit_config] conv_stages must be in [0, 5], got 6");
  EXPECT_EQ(error_of(hybrid + R"(,"conv_channels":16})"),
            "[vit_config] conv_channels 16, conv_blocks 0 and conv_stem_stride 1 need conv_stages > 0 (0 stages: no "
            "convolutional backbone)");
  EXPECT_EQ(error_of(hybrid + R"(,"conv_stages":3,"conv_channels":16,"conv_blocks":1,"conv_stem_stride":3})"),
            "[vit_config] conv_stem_stride must be 1 or 2, got 3");
  // A stem of stride 2 halves the image first: two stages reach the same 7x7 map.
  const ViTConfig h2 =
      ViTConfig::from_json(hybrid + R"(,"conv_stages":2,"conv_channels":32,"conv_blocks":1,"conv_stem_stride":2})");
  EXPECT_EQ(h2.feature_stride(), 4);
  EXPECT_EQ(h2.embed_channels(), 64);
  EXPECT_EQ(error_of(hybrid + R"(,"conv_stages":3,"conv_channels":2048,"conv_blocks":1})"),
            "[vit_config] conv_channels must be > 0 and the last stage's 2048 x 2^2 at most 4096, got 2048");
  EXPECT_EQ(error_of(hybrid + R"(,"conv_stages":3,"conv_channels":1000000000000000000,"conv_blocks":1})"),
            "[vit_config] conv_channels must be > 0 and the last stage's 1000000000000000000 x 2^2 at most 4096, got "
            "1000000000000000000");
  EXPECT_EQ(error_of(hybrid + R"(,"conv_stages":3,"conv_channels":16,"conv_blocks":0})"),
            "[vit_config] conv_blocks must be in [1, 16], got 0");
  EXPECT_EQ(error_of(valid + R"(,"conv_stages":2,"conv_channels":16,"conv_blocks":1})"),
            "[vit_config] patch_size 7 must be a multiple of the backbone's stride 2 (conv_stem_stride x "
            "2^(conv_stages - 1))");
  EXPECT_EQ(
      error_of(hybrid + R"(,"conv_stages":1,"conv_channels":16,"conv_blocks":1,"stem_layers":1,"stem_channels":8})"),
      "[vit_config] a model has a stem (stem_layers) or a convolutional backbone (conv_stages), not both");
}

// The presets are one table: each name once, each preset called by its name, each described;
// an unknown name is refused listing the known ones.
TEST(ViTConfigPresets, OneTableNamesDescribesAndBuildsEach) {
  const std::vector<std::string> names = preset_names();
  EXPECT_EQ(names.size(), 21u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const std::string& name : names) {
    const ViTConfig c = preset(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate()) << name;
    EXPECT_FALSE(preset_description(name).empty()) << name;
  }
  const std::string e = [] {
    try {
      preset("vit_gigantic");
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string("(no error)");
  }();
  EXPECT_EQ(e.rfind("[vit_config] unknown preset 'vit_gigantic' (known: vit_tiny_patch16_224, ", 0), 0u) << e;
  EXPECT_NE(e.find("vit_notebook"), std::string::npos) << e;
  EXPECT_THROW(preset_description("vit_gigantic"), Error);
}

}  // namespace
}  // namespace vit::model
