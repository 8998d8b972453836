// ViT's descendants loaded from each of their layouts against PyTorch references written from
// the published definitions (tools/golden/make_golden_variants.py: timm's vision_transformer.py /
// deit.py, transformers' modeling_deit.py, modeling_dinov2[_with_registers].py, modeling_clip.py):
// DeiT distilled (timm, HF), DeiT III (timm), DINOv2 and DINOv2 with registers (timm, HF; also
// resampled to 28 and 84 pixels), CLIP (timm, HF; --act gelu), avg pooling with fc_norm, qk_norm
// with an independent head width, registers without a class token. Logits, pooled features
// (CLIP: the projected embedding) and the final token sequence, at batch 1 and 3, through the
// graph and the inference session, within 1e-4 of the largest reference value.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "infer/inference.h"
#include "infer/load_model.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/golden.h"

namespace vit::infer {
namespace {

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/variants/";

// |ours - theirs| <= kPretrainedLogitTol (1e-4) * max|theirs| everywhere (the parity bound).
void expect_match(const Tensor& ours, const Tensor& theirs, const std::string& what) {
  EXPECT_TRUE(testing::close_to_largest(ours, theirs, testing::kPretrainedLogitTol, what));
}

struct Case {
  std::string name;
  nlohmann::json config;
  io::WeightsFile expected;
};

Case read_case(const std::string& name) {
  io::WeightsFile f = io::load_safetensors(kDir + name + ".expected.safetensors");
  nlohmann::json config = nlohmann::json::parse(f.metadata.at("config"));
  return {name, config, std::move(f)};
}

LoadSettings options_for(const Case& c, int64_t image_size = 0) {
  LoadSettings o;
  o.num_heads = c.config["num_heads"].get<int64_t>();  // width 32 is no standard width: the head count is given
  o.image_size = image_size;
  return o;
}

std::string file_of(const Case& c, const std::string& layout) { return kDir + c.name + "." + layout + ".safetensors"; }

// The graph's outputs: logits (model with a head, not a projection), pooled features (CLIP: the
// projected embedding), the token sequence.
struct Outputs {
  Tensor logits, features, tokens;
};

Outputs graph_outputs(model::VisionTransformer& m, const Tensor& x) {
  NoGradGuard no_grad;
  const model::ViTConfig& c = m.config();
  Outputs o;
  const Variable images(x);
  o.tokens = m.forward_tokens(images).data();
  if (c.projection) {
    o.features = m(images).data();
  } else {
    o.features = m.forward_features(images).data();
    if (c.has_head()) o.logits = m(images).data();
  }
  return o;
}

Outputs session_outputs(model::VisionTransformer& m, const Tensor& x) {
  const model::ViTConfig& c = m.config();
  InferenceSession session(m);
  Outputs o;
  o.tokens = session.embed(x, infer::Pool::Tokens);
  o.features = session.embed(x, c.pool == "cls" ? infer::Pool::Cls : infer::Pool::Avg);
  if (c.has_head() && !c.projection) o.logits = session.forward(x);
  return o;
}

class Variants : public ::testing::TestWithParam<std::string> {};

TEST_P(Variants, EveryLayoutMatchesItsReferenceAtBatch1And3) {
  const Case c = read_case(GetParam());
  ASSERT_FALSE(c.config["layouts"].empty());
  for (const std::string layout : c.config["layouts"]) {
    SCOPED_TRACE(c.name + "." + layout);
    LoadedModel m = load_model(file_of(c, layout), options_for(c));
    const model::ViTConfig& cfg = m.model->config();
    // What the keys told about the architecture.
    EXPECT_EQ(cfg.reg_tokens, c.config["reg_tokens"].get<int64_t>());
    EXPECT_EQ(cfg.dist_token, c.config["dist_token"].get<bool>());
    EXPECT_EQ(cfg.class_token(), c.config["class_token"].get<bool>());
    EXPECT_EQ(cfg.pre_norm, c.config["pre_norm"].get<bool>());
    EXPECT_EQ(cfg.layer_scale > 0, c.config["layer_scale"].get<bool>());
    EXPECT_EQ(cfg.qk_norm, c.config["qk_norm"].get<bool>());
    EXPECT_EQ(cfg.head_dim(), c.config["head_dim"].get<int64_t>());
    EXPECT_EQ(cfg.act, c.config["act"].get<std::string>());
    EXPECT_EQ(cfg.patch_size, c.config["patch_size"].get<int64_t>());
    EXPECT_EQ(cfg.image_size, c.config["image_size"].get<int64_t>());
    EXPECT_EQ(cfg.eps, c.config[layout == "hf" ? "eps_hf" : "eps_timm"].get<double>());
    EXPECT_EQ(cfg.projection, c.config["projection_dim"].get<int64_t>() > 0);
    EXPECT_EQ(cfg.pool == "cls", c.config["pool"] == "cls");
    // A timm-layout DeiT III keeps its position table for the patches only; a DINOv2 with
    // registers from either layout ends there (Hugging Face's class row is folded into the token).
    EXPECT_EQ(cfg.no_embed_class, c.config["no_embed_class"].get<bool>());
    for (const int64_t batch : {1, 3}) {
      const std::string b = fmt::format("_b{}.{}", batch, layout);
      const Tensor x = c.expected.get(fmt::format("input_b{}", batch)).to(DType::F32);
      for (const auto& [path, out] :
           {std::pair{std::string("graph"), graph_outputs(*m.model, x)}, {"session", session_outputs(*m.model, x)}}) {
        const std::string what = c.name + "." + layout + " " + path + " batch " + std::to_string(batch);
        if (c.expected.contains("logits" + b)) {
          ASSERT_TRUE(out.logits.defined()) << what;
          expect_match(out.logits, c.expected.get("logits" + b), what + " logits");
        } else {
          EXPECT_FALSE(out.logits.defined()) << what;
        }
        expect_match(out.features, c.expected.get("features" + b), what + " features");
        if (batch == 3) expect_match(out.tokens, c.expected.get("tokens_b3." + layout), what + " tokens");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Descendants, Variants,
                         ::testing::Values("deit_distilled", "deit3", "dinov2", "dinov2_reg", "clip", "avgpool",
                                           "qknorm_headdim", "patch8_regs_avg"));

TEST(Variants, FamiliesAndPreprocessingFollowTheKeys) {
  for (const auto& [file, family] : {std::pair{"deit_distilled.timm", "deit"},
                                     {"deit_distilled.hf", "deit"},
                                     {"dinov2.timm", "dinov2"},
                                     {"dinov2.hf", "dinov2"},
                                     {"dinov2_reg.hf", "dinov2"},
                                     {"clip.timm", "clip"},
                                     {"clip.hf", "clip"},
                                     {"avgpool.timm", "vit"}}) {
    LoadSettings o;
    o.num_heads = 2;
    const LoadedModel m = load_model(kDir + file + ".safetensors", o);
    EXPECT_STREQ(model::family_name(m.family), family) << file;
  }
  LoadSettings o;
  o.num_heads = 2;
  const LoadedModel clip = load_model(kDir + "clip.hf.safetensors", o);
  EXPECT_EQ(clip.preprocess.filter, Filter::Bicubic);
  EXPECT_NEAR(clip.preprocess.mean[0], 0.48145466, 1e-12);  // OpenAI CLIP's statistics
  // Known keys inference does not use are listed, not errors: CLIP's position_ids, DINOv2's mask token.
  EXPECT_EQ(clip.ignored_keys, (std::vector<std::string>{"vision_model.embeddings.position_ids"}));
  const LoadedModel dinov2 = load_model(kDir + "dinov2.hf.safetensors", o);
  EXPECT_EQ(dinov2.ignored_keys, (std::vector<std::string>{"embeddings.mask_token"}));
  EXPECT_TRUE(dinov2.unexpected_keys.empty());
}

// DINOv2 at other resolutions: the patch rows of the position table resampled as timm does
// (bicubic; antialiased when shrinking), the class row kept.
TEST(Variants, Dinov2ResamplesItsPositionGridToTheImageSize) {
  for (const std::string name : {"dinov2", "dinov2_reg"}) {
    const Case c = read_case(name);
    for (const int64_t size : {28, 84}) {
      const std::string key = fmt::format("features_b3_at{}", size);
      if (!c.expected.contains(key + ".timm")) continue;
      for (const std::string layout : c.config["layouts"]) {
        LoadedModel m = load_model(file_of(c, layout), options_for(c, size));
        EXPECT_EQ(m.model->config().image_size, size);
        const Tensor x = c.expected.get(fmt::format("input_b3_at{}", size)).to(DType::F32);
        InferenceSession session(*m.model);
        expect_match(session.embed(x, infer::Pool::Cls), c.expected.get(key + "." + layout),
                     fmt::format("{}.{} at {}", name, layout, size));
      }
    }
  }
  // Hugging Face's own Dinov2Model interpolates without antialiasing; timm's resampling (ours)
  // differs from it when shrinking, which the reference shows: the test above would notice a
  // plain bicubic shrink.
  const Case c = read_case("dinov2");
  const auto ours = c.expected.get("features_b3_at28.timm").to_vector();
  const auto hf = c.expected.get("hf_interp_features_b3_at28").to_vector();
  double diff = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) diff = std::max(diff, std::fabs(ours[i] - hf[i]));
  EXPECT_GT(diff, 1e-3);
}

// An OpenAI CLIP file in timm's names runs QuickGELU; --act gelu (LAION's CLIPs) exact GELU.
TEST(Variants, ClipActivationCanBeOverridden) {
  const Case c = read_case("clip");
  LoadSettings o = options_for(c);
  o.act = "gelu";
  LoadedModel m = load_model(file_of(c, "timm"), o);
  EXPECT_EQ(m.model->config().act, "gelu");
  InferenceSession session(*m.model);
  for (const int64_t batch : {1, 3}) {
    const Tensor x = c.expected.get(fmt::format("input_b{}", batch)).to(DType::F32);
    expect_match(session.embed(x, infer::Pool::Cls), c.expected.get(fmt::format("features_gelu_b{}.timm", batch)),
                 "clip --act gelu");
  }
  o.act = "swish";
  EXPECT_THROW(load_model(file_of(c, "timm"), o), Error);
}

// ---- bad files: a clear error naming the key and both shapes; --no-strict lists and continues ----

using Tensors = std::vector<std::pair<std::string, Tensor>>;

Tensors read_tensors(const std::string& path) {
  const io::WeightsFile f = io::load_safetensors(path);
  Tensors out;
  for (const auto& [key, t] : f.tensors) out.emplace_back(key, t.clone());
  return out;
}

std::string error_of(const std::string& path, LoadSettings options) {
  try {
    load_model(path, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class BadVariantFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, Tensors tensors) {
    io::save_safetensors(dir_.file(name), tensors);
    return dir_.file(name);
  }
  static LoadSettings heads() {
    LoadSettings o;
    o.num_heads = 2;
    return o;
  }
  testing::TempDir dir_;
};

TEST_F(BadVariantFiles, MixedLayoutsAreRefusedNamingAKeyOfEach) {
  Tensors t = read_tensors(kDir + "deit_distilled.timm.safetensors");
  const Tensors hf = read_tensors(kDir + "deit_distilled.hf.safetensors");
  t.push_back(hf[3]);  // deit.embeddings.patch_embeddings.projection.weight
  const std::string e = error_of(write("mixed.safetensors", t), heads());
  EXPECT_NE(e.find("mixes layouts"), std::string::npos) << e;
  EXPECT_NE(e.find("'" + hf[3].first + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("huggingface"), std::string::npos) << e;
  EXPECT_NE(e.find("timm"), std::string::npos) << e;
}

TEST_F(BadVariantFiles, MissingLayerScaleGammasAreNamed) {
  Tensors t = read_tensors(kDir + "deit3.timm.safetensors");
  std::erase_if(t, [](const auto& kv) { return kv.first == "blocks.1.ls2.gamma"; });
  const std::string path = write("ls.safetensors", t);
  const std::string e = error_of(path, heads());
  EXPECT_NE(e.find("blocks.1.ls2.gamma"), std::string::npos) << e;
  EXPECT_NE(e.find("LayerScale"), std::string::npos) << e;
  LoadSettings lenient = heads();
  lenient.strict = false;
  const LoadedModel m = load_model(path, lenient);
  EXPECT_EQ(m.missing_keys, (std::vector<std::string>{"blocks.1.ls2.gamma"}));
}

TEST_F(BadVariantFiles, ARegisterCountThatDoesNotFitThePositionTableIsNamed) {
  // timm DINOv2 with registers: 4 registers, 16 patch rows (no_embed_class). 3 registers more
  // than the table has room for with the class row counted: (1, 19, 32) fits neither reading.
  Tensors t = read_tensors(kDir + "dinov2_reg.timm.safetensors");
  for (auto& [key, v] : t) {
    if (key == "pos_embed") v = Tensor::zeros({1, 19, 32});
  }
  const std::string e = error_of(write("reg.safetensors", t), heads());
  EXPECT_NE(e.find("pos_embed (1, 19, 32)"), std::string::npos) << e;
  EXPECT_NE(e.find("reg_token (1, 4, 32)"), std::string::npos) << e;
}

TEST_F(BadVariantFiles, AProjectionOfTheWrongWidthIsNamedWithBothShapes) {
  Tensors t = read_tensors(kDir + "clip.hf.safetensors");
  for (auto& [key, v] : t) {
    if (key == "visual_projection.weight") v = Tensor::zeros({24, 31});
  }
  const std::string path = write("proj.safetensors", t);
  const std::string e = error_of(path, heads());
  EXPECT_NE(e.find("visual_projection.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(24, 31)"), std::string::npos) << e;
  EXPECT_NE(e.find("(24, 32)"), std::string::npos) << e;
}

TEST_F(BadVariantFiles, NoStrictListsWhatItSkipsAndContinues) {
  Tensors t = read_tensors(kDir + "deit_distilled.hf.safetensors");
  t.emplace_back("deit.encoder.layer.0.extra.weight", Tensor::zeros({2}));
  const std::string path = write("extra.safetensors", t);
  const std::string e = error_of(path, heads());
  EXPECT_NE(e.find("unexpected keys [deit.encoder.layer.0.extra.weight]"), std::string::npos) << e;
  LoadSettings lenient = heads();
  lenient.strict = false;
  LoadedModel m = load_model(path, lenient);
  EXPECT_EQ(m.unexpected_keys, (std::vector<std::string>{"deit.encoder.layer.0.extra.weight"}));
  const Case c = read_case("deit_distilled");
  expect_match(InferenceSession(*m.model).forward(c.expected.get("input_b3").to(DType::F32)),
               c.expected.get("logits_b3.hf"), "--no-strict deit");
}

}  // namespace
}  // namespace vit::infer
