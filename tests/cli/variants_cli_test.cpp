// ViT's descendants through the `vit` command: `vit embed` (CLIP's projected embedding, DINOv2's
// class token and tokens, image files or a .npy batch) and `vit predict` match the PyTorch
// references of tools/golden/make_golden_variants.py; feature extractors are refused by `vit predict`
// with one clear line; `vit train` trains LayerScale + registers + a distillation token against
// a --teacher checkpoint, resumes with the teacher moved, and refuses a teacher that cannot teach.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "data/image.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tolerances.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::vit;

const std::string kVariants = std::string(VIT_GOLDEN_DIR) + "/variants/";

double worst_relative(const Tensor& ours, const Tensor& theirs) {
  EXPECT_EQ(shape_str(ours.shape()), shape_str(theirs.shape()));
  const auto a = ours.to_vector(), b = theirs.to_vector();
  double top = 0.0, worst = 0.0;
  for (double v : b) top = std::max(top, std::fabs(v));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst / top;
}

class VariantsCli : public ::testing::Test {
 protected:
  // The reference's input of a case as a .npy file, and the expected tensor `key`.
  std::string input_npy(const std::string& name) {
    const io::WeightsFile f = io::load_safetensors(kVariants + name + ".expected.safetensors");
    const std::string path = dir_.file(name + "_in.npy");
    io::save_npy(path, f.get("input_b3").to(DType::F32));
    return path;
  }
  static Tensor expected(const std::string& name, const std::string& key) {
    return io::load_safetensors(kVariants + name + ".expected.safetensors").get(key).to(DType::F32);
  }
  testing::TempDir dir_;
};

TEST_F(VariantsCli, EmbedAndPredictMatchTheReferencesInEveryLayout) {
  for (const std::string layout : {"timm", "hf"}) {
    // CLIP: the projected embedding.
    const std::string out = dir_.file("clip_" + layout + ".npy");
    CommandResult r = vit("embed --checkpoint " + kVariants + "clip." + layout + ".safetensors --heads 2 --tensor " +
                          input_npy("clip") + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("(3, 24) float32 (the class token, projected by the image projection; clip"),
              std::string::npos)
        << r.out;
    EXPECT_LE(worst_relative(io::load_npy(out), expected("clip", "features_b3." + layout)),
              testing::kPretrainedLogitTol);
    // DINOv2: the class token after the final norm, and every token.
    r = vit("embed --checkpoint " + kVariants + "dinov2." + layout + ".safetensors --heads 2 --tensor " +
            input_npy("dinov2") + " --out " + dir_.file("d_" + layout + ".npy"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_LE(
        worst_relative(io::load_npy(dir_.file("d_" + layout + ".npy")), expected("dinov2", "features_b3." + layout)),
        testing::kPretrainedLogitTol);
    r = vit("embed --checkpoint " + kVariants + "dinov2_reg." + layout + ".safetensors --heads 2 --pool tokens " +
            "--tensor " + input_npy("dinov2_reg") + " --out " + dir_.file("t_" + layout + ".npy"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_LE(
        worst_relative(io::load_npy(dir_.file("t_" + layout + ".npy")), expected("dinov2_reg", "tokens_b3." + layout)),
        testing::kPretrainedLogitTol);
    // DeiT distilled: logits are the mean of the two heads.
    r = vit("predict --checkpoint " + kVariants + "deit_distilled." + layout + ".safetensors --heads 2 --tensor " +
            input_npy("deit_distilled") + " --out " + dir_.file("l_" + layout + ".npy"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_LE(worst_relative(io::load_npy(dir_.file("l_" + layout + ".npy")),
                             expected("deit_distilled", "logits_b3." + layout)),
              testing::kPretrainedLogitTol);
  }
  // The DINOv2 mask token is listed (--no-strict lists what is skipped; so does vit info), not an error.
  const CommandResult r = vit("embed --checkpoint " + kVariants + "dinov2.hf.safetensors --heads 2 --no-strict " +
                              "--tensor " + input_npy("dinov2") + " --out " + dir_.file("mask.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("not used for inference: embeddings.mask_token"), std::string::npos) << r.out;
  // A LAION-style CLIP in timm's names: --act gelu.
  const CommandResult g =
      vit("embed --checkpoint " + kVariants + "clip.timm.safetensors --heads 2 --act gelu --tensor " +
          input_npy("clip") + " --out " + dir_.file("g.npy"));
  ASSERT_EQ(g.exit_code, 0) << g.out;
  EXPECT_LE(worst_relative(io::load_npy(dir_.file("g.npy")), expected("clip", "features_gelu_b3.timm")),
            testing::kPretrainedLogitTol);
}

TEST_F(VariantsCli, EmbedReadsImageFilesAndRefusesWhatItCannotDo) {
  for (const char* name : {"a.png", "b.png"}) {
    data::Image image{3, 70, 90, std::vector<uint8_t>(3 * 70 * 90)};
    for (size_t i = 0; i < image.pixels.size(); ++i)
      image.pixels[i] = static_cast<uint8_t>(i * (name[0] == 'a' ? 7 : 13));
    data::write_png(dir_.file(name), image);
  }
  const std::string dinov2 = kVariants + "dinov2.timm.safetensors --heads 2";
  const CommandResult r = vit("embed --checkpoint " + dinov2 + " " + dir_.file("a.png") + " " + dir_.file("b.png") +
                              " --out " + dir_.file("e.npy") + " --batch-size 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Tensor e = io::load_npy(dir_.file("e.npy"));
  EXPECT_EQ(e.shape(), (Shape{2, 32}));
  const auto v = e.to_vector();
  EXPECT_NE(std::vector<double>(v.begin(), v.begin() + 32), std::vector<double>(v.begin() + 32, v.end()));
  // The same image alone gives the same row (batching changes nothing).
  ASSERT_EQ(vit("embed --checkpoint " + dinov2 + " " + dir_.file("b.png") + " --out " + dir_.file("b.npy")).exit_code,
            0);
  EXPECT_LE(worst_relative(io::load_npy(dir_.file("b.npy")), e.slice(0, 1, 2)), testing::kInferenceLogitTol);

  expect_error(vit("predict --checkpoint " + dinov2 + " " + dir_.file("a.png")),
               "[predict] " + kVariants + "dinov2.timm.safetensors: dinov2-timm-checkpoint has no classifier head (a " +
                   "feature extractor): it gives embeddings, with vit embed");
  expect_error(vit("predict --checkpoint " + kVariants + "clip.hf.safetensors --heads 2 " + dir_.file("a.png")),
               "[predict] " + kVariants +
                   "clip.hf.safetensors: clip-huggingface-checkpoint has no classifier head (its head is CLIP's image "
                   "projection): it gives embeddings, with vit embed");
  expect_error(vit("embed --checkpoint " + dinov2 + " --tensor " + input_npy("clip") + " --out " + dir_.file("x.npy")),
               "[embed] " + dir_.file("clip_in.npy") + ": input (3, 3, 32, 32) but the model takes (B, 3, 56, 56)");
  expect_error(vit("embed --checkpoint " + dinov2 + " " + dir_.file("missing.png") + " --out " + dir_.file("x.npy")),
               "[image] " + dir_.file("missing.png") + ": cannot open");
  expect_error(vit("embed --checkpoint " + kVariants + "patch8_regs_avg.timm.safetensors --heads 4 --pool cls " +
                   "--tensor " + input_npy("patch8_regs_avg") + " --out " + dir_.file("x.npy")),
               "[embed] ");
  const CommandResult no_out = vit("embed --checkpoint " + dinov2 + " " + dir_.file("a.png"));
  EXPECT_NE(no_out.exit_code, 0);
  EXPECT_NE(no_out.out.find("--out is required"), std::string::npos) << no_out.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.npy")));
}

TEST_F(VariantsCli, TrainsLayerScaleRegistersAndDistillationFromATeacher) {
  testing::write_toy_mnist(dir_.file("data"), 96, 32);
  const std::string data = " --data " + dir_.file("data") + " --batch-size 32 --threads 2 --plain";
  const std::string small = " --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2";
  CommandResult r = vit("train" + data + small + " --pool mean --epochs 1 --out " + dir_.file("teacher"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string student =
      data + small + " --pool cls --dist-token --reg-tokens 2 --layer-scale 0.1 --no-embed-class";
  r = vit("train" + student + " --epochs 2 --teacher " + dir_.file("teacher/last.safetensors") + " --out " +
          dir_.file("student"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("distillation: hard, alpha 0.5, teacher " + dir_.file("teacher/last.safetensors")),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("epoch 2/2"), std::string::npos) << r.out;
  // The student's checkpoint records the architecture and runs as any other.
  r = vit("info --checkpoint " + dir_.file("student/last.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("distillation token + head_dist, 2 register tokens, pos_embed over the patches only, "
                       "LayerScale (init 0.1)"),
            std::string::npos)
      << r.out;
  data::Image digit{1, 28, 28, std::vector<uint8_t>(784, 0)};
  for (int x = 3; x < 25; ++x) digit.pixels[9 * 28 + x] = 255;
  data::write_png(dir_.file("d.png"), digit);
  r = vit("predict --checkpoint " + dir_.file("student/last.safetensors") + " " + dir_.file("d.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = vit("embed --checkpoint " + dir_.file("student/last.safetensors") + " " + dir_.file("d.png") + " --out " +
          dir_.file("s.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(1, 16) float32 (the mean of the class and distillation tokens"), std::string::npos) << r.out;

  // Resumed with the teacher moved.
  std::filesystem::rename(dir_.file("teacher"), dir_.file("moved"));
  r = vit("train --resume " + dir_.file("student") + " --epochs 3 --plain");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--teacher " + dir_.file("teacher/last.safetensors")), std::string::npos) << r.out;
  r = vit("train --resume " + dir_.file("student") + " --epochs 3 --plain --teacher " +
          dir_.file("moved/last.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 3/3"), std::string::npos) << r.out;

  // Teachers that cannot teach: no distillation token, other classes, no file.
  expect_error(vit("train" + data + small + " --pool cls --epochs 1 --teacher " + dir_.file("moved/last.safetensors") +
                   " --out " + dir_.file("x")),
               "[train] --teacher " + dir_.file("moved/last.safetensors") +
                   ": the student has no distillation token to learn from it (a deit_*_distilled preset, or "
                   "--dist-token)");
  r = vit("train" + student + " --epochs 1 --teacher " + kVariants + "dinov2.timm.safetensors --out " + dir_.file("y"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--teacher " + kVariants + "dinov2.timm.safetensors: [checkpoint]"), std::string::npos) << r.out;
  r = vit("train" + student + " --epochs 1 --teacher " + kVariants + "deit3.timm.safetensors --out " + dir_.file("y"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--teacher " + kVariants + "deit3.timm.safetensors"), std::string::npos) << r.out;
  r = vit("train" + student + " --epochs 1 --teacher " + dir_.file("none.safetensors") + " --out " + dir_.file("z"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--teacher " + dir_.file("none.safetensors")), std::string::npos) << r.out;
  r = vit("train" + student + " --epochs 1 --teacher " + dir_.file("moved/last.safetensors") +
          " --distillation medium --out " + dir_.file("w"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--distillation"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vit
