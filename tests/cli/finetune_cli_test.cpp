// `vit train --init FILE` as a user types it: a run's checkpoint fine-tuned on other data, the head
// kept or replaced by what the classes say, grey <-> RGB input adaptation, a resampled position
// embedding, a frozen backbone that really stays frozen, layer decay, resume, the fine-tuned file
// in eval / predict, and every refusal (nothing written for any of them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/image.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::TempDir;
using testing::vit;

const char* kTiny =
    " --conv-stages 0 --patch-size 7 --dim 16 --depth 2 --heads 2 --pool mean --batch-size 32 --threads 1 --plain";

// A pretrained run on the toy digits: 10 classes "0".."9", grey 28x28.
class Finetune : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_toy_mnist(dir_.file("digits"), 192, 64);
    const CommandResult r = vit("train --preset vit_digits --data " + dir_.file("digits") + " --out " +
                                dir_.file("pre") + " --epochs 1 --ema 0" + kTiny);
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  std::string pre() const { return dir_.file("pre/last.safetensors"); }
  // The toy digits under other class names (classes.txt): `names` one per line.
  std::string renamed(const std::string& name, const std::string& names) const {
    const std::string d = dir_.file(name);
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(dir_.file("digits")))
      fs::copy_file(e.path(), d + "/" + e.path().filename().string());
    std::ofstream(d + "/classes.txt") << names;
    return d;
  }
  // 3-channel 28x28 image folders train/ and test/ with classes a, b (a: bright left half).
  std::string rgb_folders() const {
    const std::string d = dir_.file("rgb");
    for (const char* split : {"train", "test"}) {
      for (int k = 0; k < 2; ++k) {
        const std::string cls = d + "/" + split + "/" + (k == 0 ? "a" : "b");
        fs::create_directories(cls);
        for (int i = 0; i < 8; ++i) {
          data::Image im{3, 28, 28, std::vector<uint8_t>(3 * 28 * 28)};
          for (int y = 0; y < 28; ++y)
            for (int x = 0; x < 28; ++x)
              for (int c = 0; c < 3; ++c)
                im.pixels[(y * 28 + x) * 3 + c] = static_cast<uint8_t>(((x < 14) == (k == 0) ? 200 : 30) + 3 * i + c);
          data::write_png(cls + "/" + std::to_string(i) + ".png", im);
        }
      }
    }
    return d;
  }
  TempDir dir_;
};

Tensor weight(const std::string& file, const std::string& name) { return io::load_safetensors(file).get(name).clone(); }

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.data<float>()[i] != y.data<float>()[i]) return false;
  return true;
}

TEST_F(Finetune, KeepsTheHeadWhenTheClassesMatchAndStartsFromTheFilesWeights) {
  const CommandResult r = vit("train --init " + pre() + " --data " + dir_.file("digits") + " --out " + dir_.file("ft") +
                              " --epochs 1 --batch-size 32 --threads 1 --plain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("fine-tuning: initialised from " + pre()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fine-tuning: head kept: its 10 classes cover the 10"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fine-tuning: normalisation: the file's"), std::string::npos) << r.out;
  // The fine-tuned file is an ordinary checkpoint: eval, predict, and it records where it came from.
  const std::string ft = dir_.file("ft/last.safetensors");
  const CommandResult e = vit("eval --checkpoint " + ft + " --data " + dir_.file("digits") + " --json");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const auto header = io::load_safetensors(ft).metadata;
  const std::string config = header.at("train_config");
  EXPECT_NE(config.find("\"init\":\"" + pre() + "\""), std::string::npos) << config;
  EXPECT_NE(config.find("head kept"), std::string::npos) << config;
  EXPECT_NE(config.find("\"lr\":0.0001"), std::string::npos) << config;  // the fine-tuning recipe
  // report.html shows it in its configuration table.
  std::ifstream html(dir_.file("ft/report.html"));
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("initialised from"), std::string::npos);
  // Fine-tuning moved the weights from the file's, a little.
  EXPECT_FALSE(same(weight(ft, "blocks.0.mlp.fc1.weight"), weight(pre(), "blocks.0.mlp.fc1.weight")));
  // It resumes like any run: extend to 2 epochs.
  const CommandResult more = vit("train --resume " + dir_.file("ft") + " --epochs 2 --plain");
  ASSERT_EQ(more.exit_code, 0) << more.out;
  EXPECT_NE(more.out.find("epoch 2/2"), std::string::npos) << more.out;
}

TEST_F(Finetune, OtherClassesGetAFreshZeroHeadAndAFrozenBackboneStaysAsTheFileHasIt) {
  const std::string letters = renamed("letters", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n");
  const CommandResult r = vit("train --init " + pre() + " --data " + letters + " --out " + dir_.file("probe") +
                              " --epochs 1 --freeze backbone --batch-size 32 --threads 1 --plain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("a fresh zero-initialised head for 10 classes: the file's 10 classes are not the data's"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("backbone frozen"), std::string::npos) << r.out;
  const std::string probe = dir_.file("probe/last.safetensors");
  for (const char* name : {"patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc2.bias", "pos_embed",
                           "fc_norm.weight"}) {
    EXPECT_TRUE(same(weight(probe, name), weight(pre(), name))) << name << " moved under --freeze backbone";
  }
  EXPECT_FALSE(same(weight(probe, "head.weight"), weight(pre(), "head.weight")));
  // No optimiser state for what does not train.
  EXPECT_FALSE(io::load_safetensors(probe).contains("optimizer.exp_avg.blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(io::load_safetensors(probe).contains("optimizer.exp_avg.head.weight"));
  // Resumed with its own --freeze: accepted (it once said to give --init, which --resume excludes);
  // with another, refused naming the run's.
  const CommandResult same_freeze =
      vit("train --resume " + dir_.file("probe") + " --freeze backbone --epochs 2 --threads 1 --plain");
  EXPECT_EQ(same_freeze.exit_code, 0) << same_freeze.out;
  EXPECT_EQ(same_freeze.out.find("give the model to start from"), std::string::npos) << same_freeze.out;
  const CommandResult other = vit("train --resume " + dir_.file("probe") + " --freeze none --epochs 3 --plain");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.out.find("--freeze none (the run's backbone)"), std::string::npos) << other.out;
}

TEST_F(Finetune, PartlyKnownClassesAreRefusedByNameUnlessANewHeadIsAsked) {
  const std::string mixed = renamed("mixed", "0\n1\n2\n3\n4\nfive\nsix\n7\n8\n9\n");
  const CommandResult r = vit("train --init " + pre() + " --data " + mixed + " --out " + dir_.file("no") +
                              " --epochs 1 --threads 1 --plain");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("its head knows 8 of the 10 classes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("five, six"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--new-head"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_.file("no")));  // nothing written
  const CommandResult ok = vit("train --init " + pre() + " --data " + mixed + " --out " + dir_.file("yes") +
                               " --epochs 1 --new-head --layer-decay 0.65 --threads 1 --plain");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("a fresh zero-initialised head for 10 classes: --new-head"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("layer decay 0.65"), std::string::npos) << ok.out;
}

TEST_F(Finetune, AGreyModelOnRgbFoldersAndAnotherResolution) {
  const std::string rgb = rgb_folders();
  // The folders' images are resized to the model's size; --image-size 14 resamples 4x4 -> 2x2.
  const CommandResult r = vit("train --init " + pre() + " --data " + rgb + " --out " + dir_.file("rgb_run") +
                              " --epochs 1 --channels 3 --image-size 14 --batch-size 8 --threads 1 --plain");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("resolution 28 -> 14: the position embedding resampled from 4x4 to 2x2 patches"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("channels 1 -> 3: the first convolution (patch_embed.proj.weight) repeated over RGB"),
            std::string::npos)
      << r.out;
  const std::string out = dir_.file("rgb_run/last.safetensors");
  EXPECT_EQ(weight(out, "patch_embed.proj.weight").shape(), (Shape{16, 3, 7, 7}));
  EXPECT_EQ(weight(out, "pos_embed").shape(), (Shape{1, 4, 16}));
  // And back: the RGB run fine-tuned on the grey digits at 14 pixels is refused (IDX images are
  // not resized) with the way out named; at 28 pixels its convolution is summed back to grey.
  const CommandResult grey = vit("train --init " + out + " --data " + dir_.file("digits") + " --out " +
                                 dir_.file("grey_run") + " --epochs 1 --threads 1 --plain");
  EXPECT_NE(grey.exit_code, 0);
  EXPECT_NE(grey.out.find("images are 1x28x28 but the model expects 1x14x14"), std::string::npos) << grey.out;
  EXPECT_NE(grey.out.find("--image-size 28"), std::string::npos) << grey.out;
  const CommandResult back = vit("train --init " + out + " --data " + dir_.file("digits") + " --out " +
                                 dir_.file("grey_run") + " --image-size 28 --epochs 1 --threads 1 --plain");
  ASSERT_EQ(back.exit_code, 0) << back.out;
  EXPECT_NE(back.out.find("channels 3 -> 1: the first convolution (patch_embed.proj.weight) summed"), std::string::npos)
      << back.out;
}

TEST_F(Finetune, BadInitsAreRefusedAndNothingIsWritten) {
  const std::string digits = " --data " + dir_.file("digits") + " --out " + dir_.file("bad") + " --epochs 1";
  auto refused = [&](const std::string& args, const std::string& expected) {
    const CommandResult r = vit("train " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.out.find(expected), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(dir_.file("bad"))) << args;
  };
  refused("--init " + dir_.file("none.safetensors") + digits, "no such file");
  refused("--init ''" + digits, "--init: give the model file to fine-tune");  // never a default model instead
  refused("--init " + pre() + " --layer-decay nan" + digits, "--layer-decay: must be a number, got 'nan'");
  refused("--init " + pre() + " --layer-decay 0" + digits, "--layer-decay must be in (0, 1]");
  refused("--init " + pre() + " --head-lr -1" + digits, "--head-lr must be >= 0");
  refused("--init " + pre() + " --new-head=maybe" + digits, "--new-head: takes true or false, got 'maybe'");
  refused("--init " + dir_.file("pre") + digits, "is not a file");  // a folder
  refused("--init " + pre() + " --resume " + dir_.file("pre"), "--init excludes --resume");
  refused("--init " + pre() + " --preset vit_digits" + digits, "--init excludes --preset");
  refused("--init " + pre() + " --out " + dir_.file("bad"), "--init needs --data DIR");
  refused("--init " + pre() + " --dim 32" + digits, "--dim with --init");
  refused("--freeze backbone" + digits, "--freeze applies to fine-tuning");
  refused("--init " + pre() + " --freeze all" + digits, "--freeze");
  refused("--init " + pre() + " --layer-decay 1.5" + digits, "--layer-decay must be in (0, 1]");
  // A resolution that is no resolution: refused with --init as without it (it once meant "the file's").
  refused("--init " + pre() + " --image-size 0" + digits, "--image-size 0 with --init");
  refused("--init " + pre() + " --image-size=-28" + digits, "--image-size -28 with --init");
  // Not a model: an image, a pickle-ish file, an empty file.
  data::write_png(dir_.file("img.png"), data::Image{1, 4, 4, std::vector<uint8_t>(16, 7)});
  refused("--init " + dir_.file("img.png") + digits, "img.png");
  testing::write_bytes(dir_.file("model.pth"), {0x80, 0x02, 0x7d, 0x71, 0x00, 0x2e});
  refused("--init " + dir_.file("model.pth") + digits, "model.pth");
  // An int8 model.
  ASSERT_EQ(vit("quantize --checkpoint " + pre() + " --out " + dir_.file("q8.safetensors")).exit_code, 0);
  refused("--init " + dir_.file("q8.safetensors") + digits, "an int8 model (vit quantize) is for inference only");
}

// A run never replaces the file it starts from: --init (or --teacher) inside its own --out folder
// is refused, --overwrite or not, and the file stays as it was (it was once replaced by the new
// run, which then recorded itself as its own init).
TEST_F(Finetune, TheInitAndTeacherFilesAreNeverTheRunsOwn) {
  const std::string best = dir_.file("pre/best.safetensors");
  const std::vector<uint8_t> before = testing::read_bytes(best);
  const std::string common =
      " --data " + dir_.file("digits") + " --out " + dir_.file("pre") + " --overwrite --epochs 1";
  testing::expect_error(vit("train --init " + best + common + " --batch-size 32 --threads 1 --plain"),
                        "[train] --out " + best + " is the --init file itself: write the run's files to another path");
  testing::expect_error(
      vit("train --preset vit_digits --dist-token --teacher " + best + common +
          " --pool cls --patch-size 7 --dim 16 --depth 2 --heads 2 --batch-size 32 --threads 1 --plain"),
      "[train] --out " + best + " is the --teacher file itself: write the run's files to another path");
  EXPECT_EQ(testing::read_bytes(best), before);
  // Through another name of the same file (a hard link) too.
  fs::create_hard_link(best, dir_.file("alias.safetensors"));
  const CommandResult linked = vit("train --init " + dir_.file("alias.safetensors") + common + " --threads 1");
  EXPECT_NE(linked.exit_code, 0);
  EXPECT_NE(linked.out.find("is the --init file itself (the same file as"), std::string::npos) << linked.out;
  EXPECT_EQ(testing::read_bytes(best), before);
}

// A foreign head without class names: its rows are another data's classes by number only, so it
// is replaced by a fresh head (it was once kept, data classes "0", "1" taken as its rows 0, 1),
// unless --keep-head asks to keep it.
TEST_F(Finetune, ANamelessForeignHeadIsReplacedUnlessKeepHeadIsGiven) {
  const std::string timm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";  // 10 nameless classes
  const std::string data = dir_.file("numbered");
  for (const char* split : {"train", "test"}) {
    for (const char* cls : {"0", "1"}) {
      fs::create_directories(data + "/" + split + "/" + cls);
      for (int i = 0; i < 4; ++i) {
        data::Image im{3, 32, 32,
                       std::vector<uint8_t>(3 * 32 * 32, static_cast<uint8_t>(40 * i + (cls[0] - '0') * 90))};
        data::write_png(data + "/" + split + "/" + cls + "/" + std::to_string(i) + ".png", im);
      }
    }
  }
  const std::string common = " --heads 4 --data " + data + " --epochs 1 --batch-size 4 --threads 1 --plain";
  const CommandResult fresh = vit("train --init " + timm + common + " --out " + dir_.file("fresh"));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.out;
  EXPECT_NE(fresh.out.find("a fresh zero-initialised head for 2 classes: the file's 10-class head names no classes"),
            std::string::npos)
      << fresh.out;
  EXPECT_EQ(io::load_safetensors(dir_.file("fresh/last.safetensors")).get("head.weight").size(0), 2);
  const CommandResult kept = vit("train --init " + timm + common + " --keep-head --out " + dir_.file("kept"));
  ASSERT_EQ(kept.exit_code, 0) << kept.out;
  EXPECT_NE(kept.out.find("head kept"), std::string::npos) << kept.out;
  EXPECT_EQ(io::load_safetensors(dir_.file("kept/last.safetensors")).get("head.weight").size(0), 10);
  testing::expect_error(vit("train --init " + timm + common + " --keep-head --new-head --out " + dir_.file("both")),
                        "[train] --new-head excludes --keep-head");
}

}  // namespace
}  // namespace vit
