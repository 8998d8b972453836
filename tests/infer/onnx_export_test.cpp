// vit export (infer/onnx_export.h): every family's graph passes ONNX's checker, names its input and
// outputs as the serving protocol does, keeps a dynamic batch, carries the class names and the
// preprocessing, and reads back (model/layouts/onnx.h) into the very same model: the logits and
// embeddings of the file equal the checkpoint's bit for bit. int8 models are written in ONNX
// Runtime's dynamic-quantization form. (ONNX Runtime's own numbers: tools/compare/onnx_check.py.)
#include "infer/onnx_export.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "infer/load_model.h"
#include "infer/predictor.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "support/errors.h"
#include "support/files.h"
#include "support/golden.h"
#include "support/tiny_checkpoint.h"

namespace vit::infer {
namespace {

struct Family {
  const char* file;  // under tests/golden
  int64_t heads;
  bool classifier;
};

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto p;
  EXPECT_TRUE(p.ParseFromString(bytes));
  return p;
}

std::map<std::string, std::string> metadata(const onnx::ModelProto& p) {
  std::map<std::string, std::string> m;
  for (const auto& kv : p.metadata_props()) m[kv.key()] = kv.value();
  return m;
}

std::map<std::string, int> op_counts(const onnx::ModelProto& p) {
  std::map<std::string, int> n;
  for (const auto& node : p.graph().node()) {
    EXPECT_TRUE(node.domain().empty()) << node.name() << " in domain " << node.domain();  // standard ops only
    n[node.op_type()] += 1;
  }
  return n;
}

Tensor random_images(const model::ViTConfig& c, int64_t batch) {
  Generator gen(3);
  return Tensor::randn({batch, c.in_channels, c.image_size, c.image_size}, gen);
}

class ExportFamilies : public ::testing::TestWithParam<Family> {};

TEST_P(ExportFamilies, CheckedGraphThatReadsBackIntoTheSameModel) {
  const Family f = GetParam();
  testing::TempDir dir;
  LoadSettings settings;
  settings.num_heads = f.heads;
  const std::string in = std::string(VIT_GOLDEN_DIR) + "/" + f.file;
  for (const int64_t opset : {17, 14}) {
    ExportOptions options;
    options.opset = opset;
    options.overwrite = true;
    const std::string out = dir.file("m.onnx");
    const ExportResult r = export_onnx(in, out, settings, options);
    std::ifstream file(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const onnx::ModelProto p = parse(bytes);
    EXPECT_NO_THROW(onnx::checker::check_model(p)) << f.file;
    ASSERT_EQ(p.opset_import_size(), 1);
    EXPECT_EQ(p.opset_import(0).version(), opset);
    const std::map<std::string, int> ops = op_counts(p);
    EXPECT_EQ(ops.count("LayerNormalization") > 0, opset >= 17) << f.file;
    // the input (batch, C, H, W) with a symbolic batch; outputs as the serving protocol names them
    ASSERT_EQ(p.graph().input_size(), 1);
    EXPECT_EQ(p.graph().input(0).name(), "input");
    EXPECT_EQ(p.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
    std::vector<std::string> outputs;
    for (const auto& o : p.graph().output()) outputs.push_back(o.name());
    const std::vector<std::string> want =
        f.classifier ? std::vector<std::string>{"logits", "embedding"} : std::vector<std::string>{"embedding"};
    EXPECT_EQ(outputs, want);
    EXPECT_EQ(r.outputs, outputs);
    const std::map<std::string, std::string> meta = metadata(p);
    for (const char* key : {"vit.config", "vit.class_names", "vit.preprocess", "vit.family", "vit.layout"})
      EXPECT_TRUE(meta.count(key)) << key;
    // read back: the same config, class names and preprocessing, and the same numbers
    const LoadedModel original = load_model(in, settings);
    EXPECT_EQ(model::ViTConfig::from_json(meta.at("vit.config")).to_json(), original.model->config().to_json());
    EXPECT_EQ(nlohmann::json::parse(meta.at("vit.class_names")).get<std::vector<std::string>>(), original.class_names);
    Predictor a(load_model(in, settings));
    Predictor b(load_model(out));
    EXPECT_EQ(b.loaded().preprocess.describe(), a.loaded().preprocess.describe());
    EXPECT_EQ(b.loaded().class_names, a.loaded().class_names);
    EXPECT_EQ(model::family_name(b.loaded().family), model::family_name(a.loaded().family));
    const Tensor x = random_images(a.config(), 3);
    const Tensor ea = a.embed(x, a.default_pool()), eb = b.embed(x, b.default_pool());
    EXPECT_TRUE(testing::close_to_largest(eb, ea, 0.0, std::string(f.file) + " embedding"));
    if (f.classifier) {
      EXPECT_TRUE(testing::close_to_largest(b.predict(x), a.predict(x), 0.0, std::string(f.file) + " logits"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, ExportFamilies,
                         ::testing::Values(Family{"layouts/timm.safetensors", 4, true},
                                           Family{"layouts/torchvision.safetensors", 4, true},
                                           Family{"layouts/hf.safetensors", 4, true},
                                           Family{"variants/deit_distilled.timm.safetensors", 2, true},
                                           Family{"variants/deit3.timm.safetensors", 2, true},
                                           Family{"variants/dinov2_reg.hf.safetensors", 2, false},
                                           Family{"variants/clip.hf.safetensors", 2, false},
                                           Family{"variants/patch8_regs_avg.timm.safetensors", 2, true},
                                           Family{"variants/qknorm_headdim.timm.safetensors", 2, true},
                                           Family{"pth/jax_prelogits.npz", 4, true}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.file;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(Export, Int8IsOnnxRuntimesDynamicQuantizationPattern) {
  testing::TempDir dir;
  LoadSettings settings;
  settings.num_heads = 4;
  ExportOptions options;
  options.int8 = true;
  const std::string in = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";
  const ExportResult r = export_onnx(in, dir.file("q.onnx"), settings, options);
  EXPECT_EQ(r.precision, "int8");
  // 2 blocks x (qkv, proj, fc1, fc2) + head: every Linear, as vit quantize quantizes them
  EXPECT_EQ(r.quantized_linears, 9);
  const std::vector<uint8_t> raw = testing::read_bytes(dir.file("q.onnx"));
  const onnx::ModelProto p = parse(std::string(raw.begin(), raw.end()));
  EXPECT_NO_THROW(onnx::checker::check_model(p));
  const std::map<std::string, int> ops = op_counts(p);
  EXPECT_EQ(ops.at("DynamicQuantizeLinear"), 9);
  EXPECT_EQ(ops.at("MatMulInteger"), 9);
  EXPECT_EQ(ops.at("Cast"), 9);
  EXPECT_EQ(ops.at("MatMul"), 4);  // the attention's two per block stay float
  // per-channel int8 weights (in, out) with int8 zero points of one per output channel
  int int8_weights = 0;
  for (const auto& t : p.graph().initializer()) {
    if (t.data_type() != onnx::TensorProto::INT8) continue;
    ++int8_weights;
    if (t.name().find("zero_point") != std::string::npos) {
      EXPECT_EQ(t.dims_size(), 1) << t.name();
    }
  }
  EXPECT_EQ(int8_weights, 18);
  EXPECT_EQ(metadata(p).at("vit.precision"), "int8");
  // an int8 ONNX file is not read back as a model: refused naming the op
  EXPECT_NE(testing::error_of([&] { (void)load_model(dir.file("q.onnx")); }).find("op 'DynamicQuantizeLinear'"),
            std::string::npos);
}

// Our own checkpoints: a mean-pooled grey model reads back exactly; the hybrid (its BatchNorms
// folded into its convolutions, statistics away from their initial values) passes the checker and
// is refused on the way back, naming why.
TEST(Export, OurCheckpointsAndTheHybrid) {
  testing::TempDir dir;
  testing::write_tiny_checkpoint(dir.file("tiny.safetensors"));
  export_onnx(dir.file("tiny.safetensors"), dir.file("tiny.onnx"), {}, {});
  Predictor a = Predictor::load(dir.file("tiny.safetensors")), b = Predictor::load(dir.file("tiny.onnx"));
  const Tensor x = random_images(a.config(), 2);
  EXPECT_TRUE(testing::close_to_largest(b.predict(x), a.predict(x), 0.0, "tiny logits"));
  EXPECT_EQ(b.loaded().class_names, a.loaded().class_names);

  checkpoint::CheckpointInfo info = testing::tiny_checkpoint_info();
  info.model = model::preset("vit_hybrid_fashion");
  model::VisionTransformer hybrid(info.model, std::make_shared<Generator>(5));
  Generator gen(9);
  for (auto& [name, buffer] : hybrid.named_buffers()) {
    if (name.find("running_mean") != std::string::npos) buffer.data().copy_(Tensor::randn(buffer.shape(), gen));
    if (name.find("running_var") != std::string::npos) {
      Tensor var = Tensor::rand(buffer.shape(), gen);
      for (int64_t i = 0; i < var.numel(); ++i) var.data<float>()[i] += 0.5f;
      buffer.data().copy_(var);
    }
  }
  checkpoint::save_checkpoint(dir.file("hybrid.safetensors"), hybrid, info);
  const ExportResult r = export_onnx(dir.file("hybrid.safetensors"), dir.file("hybrid.onnx"), {}, {});
  const std::vector<uint8_t> raw = testing::read_bytes(dir.file("hybrid.onnx"));
  const onnx::ModelProto p = parse(std::string(raw.begin(), raw.end()));
  EXPECT_NO_THROW(onnx::checker::check_model(p));
  const std::map<std::string, int> ops = op_counts(p);
  EXPECT_EQ(ops.at("Conv"), 1 + 2 + 3 + 1);        // stem, stage 0's block, stage 1's block with its downsample, patch
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);  // folded
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"logits", "embedding"}));
  EXPECT_NE(testing::error_of([&] {
              (void)load_model(dir.file("hybrid.onnx"));
            }).find("convolutions before the tokens: a convolutional stem or hybrid backbone"),
            std::string::npos)
      << testing::error_of([&] { (void)load_model(dir.file("hybrid.onnx")); });
}

TEST(Export, RefusesWhatItCannotWrite) {
  testing::TempDir dir;
  LoadSettings settings;
  settings.num_heads = 4;
  const std::string in = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";
  ExportOptions old;
  old.opset = 12;
  EXPECT_NE(testing::error_of([&] {
              export_onnx(in, dir.file("a.onnx"), settings, old);
            }).find("--opset 12: vit writes opsets 13 to 17"),
            std::string::npos);
  ExportOptions options;
  export_onnx(in, dir.file("a.onnx"), settings, options);
  EXPECT_NE(testing::error_of([&] { export_onnx(in, dir.file("a.onnx"), settings, options); }).find("exists"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { export_onnx(in, in, settings, options); }).find("OUT"), std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              export_onnx(dir.file("none.safetensors"), dir.file("b.onnx"), settings, options);
            }).find("none.safetensors"),
            std::string::npos);
}

}  // namespace
}  // namespace vit::infer
