// Pretrained checkpoints in timm / torchvision / Hugging Face layouts (tiny fixtures made by
// tools/golden/make_golden_layouts.py with PyTorch, torchvision's own VisionTransformer among them):
// logits match PyTorch's within 1e-4 of the largest logit, at batch 1 and 4; F16/BF16 files
// widen correctly; position embeddings interpolate as timm / torchvision do; bad files are refused
// with the file, key and shapes named.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "infer/load_model.h"
#include "io/safetensors.h"
#include "model/layouts/config_from_shapes.h"
#include "model/pos_embed.h"
#include "support/files.h"
#include "support/golden.h"

namespace vit::infer {
namespace {

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/layouts/";

// |ours - theirs| <= kPretrainedLogitTol (1e-4) * max|theirs| for every logit (the parity target).
void expect_logits_match(const Tensor& ours, const Tensor& theirs, const std::string& what) {
  EXPECT_TRUE(testing::close_to_largest(ours, theirs, testing::kPretrainedLogitTol, what));
}

// The fixtures are 48 wide with 4 heads; 48 is no standard width, so (as a user would) the head
// count is given: --heads 4.
LoadSettings with_heads(LoadSettings o = {}) {
  o.num_heads = 4;
  return o;
}

Tensor run(LoadedModel& m, const Tensor& x) {
  NoGradGuard no_grad;
  return (*m.model)(Variable(x)).data();
}

class Layouts : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(Layouts, LogitsMatchPyTorchAtBatch1And4) {
  const auto& [file, reference] = GetParam();
  const io::WeightsFile ref = io::load_safetensors(kDir + "input.safetensors");
  LoadedModel m = load_model(kDir + file, with_heads());
  const Tensor x = ref.get("input").to(DType::F32);
  expect_logits_match(run(m, x), ref.get(reference), file + " batch 4");
  expect_logits_match(run(m, x.slice(0, 2, 3)), ref.get(reference).slice(0, 2, 3), file + " batch 1");
  EXPECT_EQ(m.model->config().num_heads, 4);
  EXPECT_EQ(m.model->config().image_size, 32);
  EXPECT_EQ(m.model->config().depth, 2);
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, Layouts,
                         ::testing::Values(std::pair{"timm.safetensors", "logits_timm"},
                                           std::pair{"torchvision.safetensors", "logits_torchvision"},
                                           std::pair{"torchvision_legacy.safetensors", "logits_torchvision"},
                                           std::pair{"hf.safetensors", "logits_hf"},
                                           std::pair{"hf_noprefix.safetensors", "logits_hf"},
                                           std::pair{"timm_f16.safetensors", "logits_timm_f16"},
                                           std::pair{"timm_bf16.safetensors", "logits_timm_bf16"}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.first.substr(0, param_info.param.first.find('.'));
                           return name;
                         });

TEST(Layouts, DetectionDefaultsAndForcing) {
  EXPECT_EQ(load_model(kDir + "timm.safetensors", with_heads()).layout, "timm");
  EXPECT_EQ(load_model(kDir + "torchvision.safetensors", with_heads()).layout, "torchvision");
  const LoadedModel hf = load_model(kDir + "hf.safetensors", with_heads());
  EXPECT_EQ(hf.layout, "huggingface");
  EXPECT_EQ(hf.model->config().eps, 1e-12);
  EXPECT_EQ(load_model(kDir + "timm.safetensors", with_heads()).model->config().eps, 1e-6);
  // 48 is no standard width: refused without --heads (it once got 48 / 64 floored at 1 head).
  EXPECT_THROW(load_model(kDir + "timm.safetensors"), Error);
  EXPECT_EQ(model::default_num_heads(768), 12);
  EXPECT_EQ(model::default_num_heads(192), 3);
  LoadSettings forced = with_heads();
  forced.layout = model::Layout::Timm;
  EXPECT_THROW(load_model(kDir + "hf.safetensors", forced), Error);  // HF keys are not timm keys
  LoadSettings heads;
  heads.num_heads = 5;  // 48 is not divisible by 5
  EXPECT_THROW(load_model(kDir + "timm.safetensors", heads), Error);
}

TEST(PosEmbed, ResamplingMatchesTimmAndTorchvision) {
  const io::WeightsFile f = io::load_safetensors(kDir + "posembed.safetensors");
  const Tensor pos = io::load_safetensors(kDir + "timm.safetensors").get("pos_embed");
  EXPECT_CLOSE(model::resample_pos_embed(pos, 1, 6, 6, false), f.get("resample_timm"), testing::kGoldenFloatTol);
  EXPECT_CLOSE(model::resample_pos_embed(pos, 1, 6, 6, true), f.get("resample_torchvision"), testing::kGoldenFloatTol);
  EXPECT_CLOSE(model::resample_pos_embed(pos, 1, 3, 3, false), f.get("resample_timm_down"), testing::kGoldenFloatTol);
  // The whole model at 48x48 (6x6 patches) against timm run with the resampled embedding.
  LoadSettings at48 = with_heads();
  at48.image_size = 48;
  LoadedModel m = load_model(kDir + "timm.safetensors", at48);
  EXPECT_EQ(m.model->config().image_size, 48);
  expect_logits_match(run(m, f.get("input_48").to(DType::F32)), f.get("logits_timm_48"), "timm at 48x48");
  LoadSettings odd = with_heads();
  odd.image_size = 50;
  EXPECT_THROW(load_model(kDir + "timm.safetensors", odd), Error);
}

TEST(BadCheckpoints, MissingUnexpectedWrongShapeNotAViT) {
  testing::TempDir dir;
  const io::WeightsFile timm = io::load_safetensors(kDir + "timm.safetensors");
  auto write_variant = [&](const std::string& name, auto edit) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [key, t] : timm.tensors) tensors.emplace_back(key, t.clone());
    edit(tensors);
    io::save_safetensors(dir.file(name), tensors);
    return dir.file(name);
  };
  auto error_of = [](const std::string& path, LoadSettings options = with_heads()) -> std::string {
    try {
      load_model(path, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string missing = write_variant("missing.safetensors", [](auto& t) {
    t.erase(std::remove_if(t.begin(), t.end(), [](const auto& kv) { return kv.first == "blocks.1.norm2.bias"; }),
            t.end());
  });
  const std::string e1 = error_of(missing);
  EXPECT_NE(e1.find(missing), std::string::npos) << e1;
  EXPECT_NE(e1.find("missing keys [blocks.1.norm2.bias]"), std::string::npos) << e1;
  LoadSettings lenient = with_heads();
  lenient.strict = false;
  const LoadedModel partial = load_model(missing, lenient);
  EXPECT_EQ(partial.missing_keys, (std::vector<std::string>{"blocks.1.norm2.bias"}));

  const std::string extra =
      write_variant("extra.safetensors", [](auto& t) { t.emplace_back("blocks.0.gamma", Tensor::zeros({48})); });
  EXPECT_NE(error_of(extra).find("unexpected keys [blocks.0.gamma]"), std::string::npos) << error_of(extra);
  EXPECT_EQ(load_model(extra, lenient).unexpected_keys, (std::vector<std::string>{"blocks.0.gamma"}));

  const std::string wrong = write_variant("wrong.safetensors", [](auto& t) {
    for (auto& [key, v] : t) {
      if (key == "blocks.0.attn.proj.weight") v = Tensor::zeros({48, 47});
    }
  });
  const std::string e3 = error_of(wrong);
  EXPECT_NE(e3.find(wrong), std::string::npos) << e3;
  EXPECT_NE(e3.find("'blocks.0.attn.proj.weight': expected shape (48, 48), got (48, 47)"), std::string::npos) << e3;

  io::save_safetensors(dir.file("notvit.safetensors"), {{"weight", Tensor::zeros({2, 2})}});
  EXPECT_NE(error_of(dir.file("notvit.safetensors")).find("not a ViT checkpoint of a known layout"), std::string::npos);
  testing::write_bytes(dir.file("garbage.safetensors"), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_NE(error_of(dir.file("garbage.safetensors"))
                .find("[file] " + dir.file("garbage.safetensors") + ": not a file vit reads"),
            std::string::npos);
  EXPECT_NE(error_of(dir.file("none.safetensors")).find("cannot open"), std::string::npos);
}

// Key errors name the key at fault: block 0 without its qkv bias is block 0's missing key (not
// block 1's bias as unexpected); a gap in the block numbers names the absent block.
TEST(BadCheckpoints, KeyErrorsBlameTheRightKey) {
  testing::TempDir dir;
  const io::WeightsFile timm = io::load_safetensors(kDir + "timm.safetensors");
  ASSERT_TRUE(timm.contains("blocks.1.attn.qkv.bias"));
  auto write_variant = [&](const std::string& name, auto edit) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [key, t] : timm.tensors) {
      if (auto renamed = edit(key)) tensors.emplace_back(*renamed, t.clone());
    }
    io::save_safetensors(dir.file(name), tensors);
    return dir.file(name);
  };
  auto error_of = [](const std::string& path) -> std::string {
    try {
      load_model(path, with_heads());
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string no_bias = write_variant("no_bias.safetensors", [](const std::string& key) {
    return key == "blocks.0.attn.qkv.bias" ? std::nullopt : std::optional<std::string>(key);
  });
  const std::string e1 = error_of(no_bias);
  EXPECT_NE(e1.find("missing keys [blocks.0.attn.qkv.bias]; unexpected keys []"), std::string::npos) << e1;

  const std::string gap = write_variant("gap.safetensors", [](const std::string& key) {
    std::string k = key;
    if (k.rfind("blocks.1.", 0) == 0) k.replace(0, 9, "blocks.2.");
    return std::optional<std::string>(k);
  });
  const std::string e2 = error_of(gap);
  EXPECT_NE(e2.find("no keys of block 1 (missing: 'blocks.1.*')"), std::string::npos) << e2;
  EXPECT_EQ(e2.find("unexpected"), std::string::npos) << e2;
}

TEST(ImageNet, ClassNamesShipWithTheProject) {
  const auto& names = imagenet_class_names();
  ASSERT_EQ(names.size(), 1000u);
  EXPECT_EQ(names[0], "tench");
  EXPECT_EQ(names[285], "Egyptian cat");
}

}  // namespace
}  // namespace vit::infer
