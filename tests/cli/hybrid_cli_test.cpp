// A hybrid (convolutional stages, then the transformer) through every door a user types: trained
// by `vit train`, then `vit eval`, `vit predict` (image files and a .npy batch), `vit embed`
// (pooled and tokens), `vit attention` (the transformer part), `vit info`, `vit quantize` (int8:
// the convolutions stay float32; bf16: they are stored in bfloat16) with the quantized files
// predicting what the float one does, the run's report, `vit convert` (a rewritten copy predicts
// the same logits), and `vit train --init` fine-tuning from it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "data/image.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/similarity.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::TempDir;
using testing::vit;

const char* kTinyHybrid =
    " --conv-channels 8 --dim 16 --heads 2 --depth 1 --batch-size 32 --threads 1 --plain --ema 0 --epochs 1";

double cosine(const Tensor& a, const Tensor& b) { return testing::similarity(a, b).cosine; }

class HybridCli : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_toy_mnist(dir_.file("digits"), 192, 64);
    const CommandResult r = vit("train --preset vit_hybrid_fashion --data " + dir_.file("digits") + " --out " +
                                dir_.file("run") + kTinyHybrid);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // Three grey 28x28 images as a .npy batch and one as a PNG.
    Generator gen(3);
    io::save_npy(dir_.file("x.npy"), Tensor::rand({3, 1, 28, 28}, gen));
    data::Image im{1, 28, 28, std::vector<uint8_t>(28 * 28)};
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7 % 251);
    data::write_png(dir_.file("x.png"), im);
  }
  std::string run() const { return dir_.file("run/last.safetensors"); }
  // The logits `vit predict` writes for the .npy batch from `checkpoint`.
  Tensor logits(const std::string& checkpoint, const std::string& name) {
    const CommandResult r =
        vit("predict --checkpoint " + checkpoint + " --tensor " + dir_.file("x.npy") + " --out " + dir_.file(name));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return io::load_npy(dir_.file(name));
  }
  TempDir dir_;
};

TEST_F(HybridCli, EveryCommandRunsIt) {
  CommandResult r = vit("eval --checkpoint " + run() + " --data " + dir_.file("digits") + " --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("accuracy"), std::string::npos) << r.out;

  r = vit("predict --checkpoint " + run() + " " + dir_.file("x.png") + " --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Tensor fp32 = logits(run(), "fp32.npy");
  EXPECT_EQ(shape_str(fp32.shape()), "(3, 10)");

  r = vit("embed --checkpoint " + run() + " --tensor " + dir_.file("x.npy") + " --out " + dir_.file("e.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(shape_str(io::load_npy(dir_.file("e.npy")).shape()), "(3, 16)");
  r = vit("embed --checkpoint " + run() + " --pool tokens --tensor " + dir_.file("x.npy") + " --out " +
          dir_.file("t.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(shape_str(io::load_npy(dir_.file("t.npy")).shape()), "(3, 49, 16)");  // the 7x7 map's positions

  r = vit("attention --checkpoint " + run() + " " + dir_.file("x.png") + " --out " + dir_.file("a.png") + " --size 64");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_.file("a.png")));

  r = vit("info --checkpoint " + run());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("backbone: 3x3 stem (stride 2) + 2 ResNet stages"), std::string::npos) << r.out;

  // int8: the transformer's Linears quantized, the convolutions kept float32.
  r = vit("quantize --checkpoint " + run() + " --out " + dir_.file("q8.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const io::WeightsFile q8 = io::load_safetensors(dir_.file("q8.safetensors"));
  EXPECT_EQ(q8.get("backbone.stages.0.0.conv1.weight").dtype(), DType::F32);
  EXPECT_GE(cosine(logits(dir_.file("q8.safetensors"), "q8.npy"), fp32), 0.99);
  // bf16: every weight stored in bfloat16, convolutions included.
  r = vit("quantize --dtype bf16 --checkpoint " + run() + " --out " + dir_.file("bf16.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GE(cosine(logits(dir_.file("bf16.safetensors"), "bf16.npy"), fp32), 0.999);

  // The run's report, and `vit convert` rewriting the checkpoint: the same logits from the copy.
  EXPECT_GT(fs::file_size(dir_.file("run/report.html")), 0u);
  r = vit("convert " + run() + " " + dir_.file("converted.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Tensor converted = logits(dir_.file("converted.safetensors"), "converted.npy");
  ASSERT_EQ(converted.numel(), fp32.numel());
  for (int64_t i = 0; i < fp32.numel(); ++i) EXPECT_EQ(converted.data<float>()[i], fp32.data<float>()[i]) << i;

  // Fine-tuning from it: the backbone's weights and BatchNorm statistics carried over.
  r = vit("train --init " + run() + " --data " + dir_.file("digits") + " --out " + dir_.file("ft") +
          " --batch-size 32 --threads 1 --plain --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_.file("ft/last.safetensors")));
}

}  // namespace
}  // namespace vit
