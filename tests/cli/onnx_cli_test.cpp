// ONNX through the `vit` command as a user types it: `vit export IN OUT.onnx` (float32, int8,
// --opset), and an .onnx file wherever a model file goes: predict, embed, eval, info, quantize and
// train --init; bad flags and files refused with one line.
#include <gtest/gtest.h>

#include <string>

#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

std::string golden(const std::string& name) { return std::string(VIT_GOLDEN_DIR) + "/" + name; }

class OnnxCli : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_toy_mnist(dir_.file("digits"), 128, 64);
    const CommandResult r =
        vit("train --preset vit_digits --data " + dir_.file("digits") + " --out " + dir_.file("run") +
            " --epochs 1 --ema 0 --conv-stages 0 --patch-size 7 --dim 16 --depth 1 --heads 2 "
            "--pool cls --batch-size 32 --threads 1 --plain");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  std::string run() const { return dir_.file("run/last.safetensors"); }
  TempDir dir_;
};

TEST_F(OnnxCli, ExportThenEveryCommandReadsTheOnnxFileAsTheCheckpoint) {
  const std::string onnx = dir_.file("model.onnx");
  const CommandResult e = vit("export " + run() + " " + onnx);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find("ONNX opset 17, float32"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("outputs: logits, embedding (batch dimension dynamic)"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("checked by ONNX's checker"), std::string::npos) << e.out;
  // the same predictions, eval accuracy and embeddings from the checkpoint and from its export
  const CommandResult a = vit("eval --checkpoint " + run() + " --data " + dir_.file("digits") + " --json");
  const CommandResult b = vit("eval --checkpoint " + onnx + " --data " + dir_.file("digits") + " --json");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const auto accuracy = [](const std::string& out) {  // loss, top-1, top-5: the same to the last digit
    const size_t from = out.find("\"loss\"");
    return from == std::string::npos ? out : out.substr(from, out.find("\"precision\"") - from);
  };
  EXPECT_EQ(accuracy(a.out), accuracy(b.out));
  const CommandResult info = vit("info --checkpoint " + onnx);
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("ONNX model (vit export)"), std::string::npos) << info.out;
  // int8 from the ONNX file; fine-tuning from it
  const CommandResult q = vit("quantize --checkpoint " + onnx + " --out " + dir_.file("q.safetensors"));
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const CommandResult t = vit("train --init " + onnx + " --data " + dir_.file("digits") + " --out " + dir_.file("ft") +
                              " --epochs 1 --batch-size 32 --threads 1 --plain");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  EXPECT_NE(t.out.find("fine-tuning: head kept"), std::string::npos) << t.out;
  // int8 export: from the float file (quantized on the way) and from the int8 checkpoint
  const CommandResult q8 = vit("export " + run() + " " + dir_.file("q8.onnx") + " --precision int8");
  ASSERT_EQ(q8.exit_code, 0) << q8.out;
  EXPECT_NE(q8.out.find("int8 (5 int8 Linears, 7-bit weights)"), std::string::npos) << q8.out;
  const CommandResult q8b = vit("export " + dir_.file("q.safetensors") + " " + dir_.file("q8b.onnx") + " --opset 15");
  ASSERT_EQ(q8b.exit_code, 0) << q8b.out;
  EXPECT_NE(q8b.out.find("ONNX opset 15, int8 (5 int8 Linears, 8-bit weights)"), std::string::npos) << q8b.out;
  EXPECT_NE(q8b.out.find("note: 8-bit int8 weights: ONNX Runtime's int8 kernel on CPUs without VNNI"),
            std::string::npos)
      << q8b.out;
}

TEST_F(OnnxCli, ExternalDataBesideTheModelReadsBack) {
  const CommandResult e = vit("export " + run() + " " + dir_.file("ext.onnx") + " --external-data");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find("weights in " + dir_.file("ext.onnx.data")), std::string::npos) << e.out;
  // the weights (12 KB) beside the graph; without --external-data one file holds both
  const size_t graph = testing::read_bytes(dir_.file("ext.onnx")).size();
  const size_t weights = testing::read_bytes(dir_.file("ext.onnx.data")).size();
  ASSERT_EQ(vit("export " + run() + " " + dir_.file("one.onnx")).exit_code, 0);
  EXPECT_GT(weights, 10000u);
  EXPECT_GT(testing::read_bytes(dir_.file("one.onnx")).size(), graph + weights * 3 / 4);
  EXPECT_LT(graph, weights);
  const CommandResult a = vit("eval --checkpoint " + run() + " --data " + dir_.file("digits") + " --json");
  const CommandResult b =
      vit("eval --checkpoint " + dir_.file("ext.onnx") + " --data " + dir_.file("digits") + " --json");
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const auto scores = [](const std::string& out) {  // loss, top-1, top-5
    const size_t from = out.find("\"loss\"");
    return from == std::string::npos ? out : out.substr(from, out.find("\"precision\"") - from);
  };
  EXPECT_EQ(scores(a.out), scores(b.out));
  // again without --overwrite: refused before anything is loaded; the data file cut short: refused by size
  expect_error(vit("export " + run() + " " + dir_.file("ext.onnx") + " --external-data"), "[export] OUT");
  std::vector<uint8_t> data = testing::read_bytes(dir_.file("ext.onnx.data"));
  data.resize(data.size() / 2);
  testing::write_bytes(dir_.file("ext.onnx.data"), data);
  expect_error(vit("info --checkpoint " + dir_.file("ext.onnx")), "[onnx]");
}

TEST_F(OnnxCli, TorchExportsPredictAndBadInputsAreRefused) {
  // a torchvision export (PyTorch 1.13, opset 14) on a .npy batch
  const CommandResult p = vit("info --checkpoint " + golden("onnx/torchvision_op14.onnx"));
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("torchvision layout; ONNX model (producer pytorch"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("heads 4"), std::string::npos) << p.out;
  // refusals, each one line
  expect_error(vit("export " + run() + " " + dir_.file("a.onnx") + " --opset 18"), "[export] --opset 18");
  expect_error(vit("export " + run() + " " + dir_.file("a.onnx") + " --bits 7"), "[export] --bits 7 is for");
  expect_error(vit("export " + run() + " " + dir_.file("a.onnx") + " --precision fp16"),
               "[export] precision must be float32 or int8, got 'fp16'");
  expect_error(vit("export " + dir_.file("none.safetensors") + " " + dir_.file("a.onnx")), "");
  expect_error(vit("export " + run() + " " + run()), "[export] OUT");
  const CommandResult ok = vit("export " + run() + " " + dir_.file("a.onnx"));
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  expect_error(vit("export " + run() + " " + dir_.file("a.onnx")), "[export] OUT");
  testing::write_bytes(dir_.file("cut.onnx"), {0x08, 0x08, 0x12, 0x05, 'p', 'y'});
  expect_error(vit("predict --checkpoint " + dir_.file("cut.onnx") + " --tensor x.npy"), "[onnx]");
  expect_error(vit("predict --checkpoint " + golden("onnx/timm_op17.onnx") + " --layout timm --tensor x.npy"),
               "[onnx]");
}

}  // namespace
}  // namespace vit
