// ONNX files as a model source (infer/onnx_source.cpp, model/layouts/onnx.h): the graphs PyTorch
// 1.13's torch.onnx.export writes for torchvision's, timm's and Hugging Face's ViTs and timm's DeiT
// (distilled) and DeiT III (golden files of tools/golden/make_golden_onnx.py, opsets 14-17, folded
// and not) match PyTorch within 1e-5 of the largest logit; hostile files are refused naming what is
// wrong.
#include <gtest/gtest.h>

#include <fstream>

#include "infer/load_model.h"
#include "infer/onnx_export.h"
#include "infer/predictor.h"
#include "io/onnx.h"
#include "onnx/onnx_pb.h"
#include "support/errors.h"
#include "support/files.h"
#include "support/golden.h"

namespace vit::infer {
namespace {

constexpr double kOnnxParity = 1e-5;  // of the largest logit (issue #45)

std::string onnx_golden(const std::string& name) { return std::string(VIT_GOLDEN_DIR) + "/onnx/" + name + ".onnx"; }

struct GoldenCase {
  const char* file;
  const char* logits;  // the key in expected.safetensors
  const char* layout;
  double eps;
};

class TorchExports : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(TorchExports, LoadAndMatchPyTorch) {
  const GoldenCase c = GetParam();
  const io::WeightsFile expected = testing::load_golden("onnx/expected.safetensors");
  Predictor model = Predictor::load(onnx_golden(c.file));
  const model::ViTConfig& config = model.config();
  EXPECT_EQ(config.num_heads, 4);  // told by the attention's scale (heads 12 wide of 48)
  EXPECT_EQ(config.depth, 2);
  EXPECT_EQ(config.dim, 48);
  EXPECT_EQ(config.num_classes, 10);
  EXPECT_DOUBLE_EQ(config.eps, c.eps);
  EXPECT_EQ(model.loaded().layout, c.layout);
  EXPECT_EQ(model.loaded().format, io::WeightsFormat::Onnx);
  EXPECT_EQ(config.dist_token, std::string(c.file).rfind("deit_distilled", 0) == 0);
  EXPECT_EQ(config.no_embed_class, std::string(c.file).rfind("deit3", 0) == 0);
  EXPECT_EQ(config.layer_scale > 0, std::string(c.file).rfind("deit3", 0) == 0);
  const Tensor logits = model.predict(testing::golden(expected, "input", DType::F32));
  EXPECT_TRUE(testing::close_to_largest(logits, testing::golden(expected, c.logits, DType::F32), kOnnxParity, c.file));
}

INSTANTIATE_TEST_SUITE_P(Goldens, TorchExports,
                         ::testing::Values(GoldenCase{"torchvision_op14", "torchvision.logits", "torchvision", 1e-6},
                                           GoldenCase{"torchvision_op17_nofold", "torchvision.logits", "torchvision",
                                                      1e-6},
                                           GoldenCase{"timm_op17", "timm.logits", "timm", 1e-6},
                                           GoldenCase{"timm_op15_nofold", "timm.logits", "timm", 1e-6},
                                           GoldenCase{"hf_op16", "hf.logits", "huggingface", 1e-12},
                                           GoldenCase{"deit_distilled_op17", "deit_distilled.logits", "timm", 1e-6},
                                           GoldenCase{"deit3_op14", "deit3.logits", "timm", 1e-6}),
                         [](const auto& param_info) { return std::string(param_info.param.file); });

// ---- hostile files: each refused with a message naming what is wrong ----

onnx::ModelProto golden_proto(const std::string& name) {
  std::ifstream in(onnx_golden(name), std::ios::binary);
  onnx::ModelProto p;
  EXPECT_TRUE(p.ParseFromIstream(&in));
  return p;
}

std::string write_proto(const testing::TempDir& dir, const onnx::ModelProto& p, const std::string& name = "m.onnx") {
  std::string bytes;
  EXPECT_TRUE(p.SerializeToString(&bytes));
  testing::write_bytes(dir.file(name), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  return dir.file(name);
}

std::string load_error(const std::string& path) {
  return testing::error_of([&] { (void)load_model(path); });
}

onnx::TensorProto* initializer(onnx::ModelProto& p, const std::string& name) {
  for (auto& t : *p.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

TEST(OnnxHostile, TruncatedProtobufIsRefused) {
  testing::TempDir dir;
  std::vector<uint8_t> bytes = testing::read_bytes(onnx_golden("timm_op17"));
  bytes.resize(bytes.size() / 2);
  testing::write_bytes(dir.file("cut.onnx"), bytes);
  EXPECT_NE(load_error(dir.file("cut.onnx")).find("not a valid ONNX model (the protobuf does not parse"),
            std::string::npos);
  testing::write_bytes(dir.file("empty.onnx"), {});
  EXPECT_NE(load_error(dir.file("empty.onnx")).find("empty"), std::string::npos) << load_error(dir.file("empty.onnx"));
}

TEST(OnnxHostile, WrongTensorSizesAndHugeDimsAreRefused) {
  testing::TempDir dir;
  onnx::ModelProto p = golden_proto("timm_op17");
  onnx::TensorProto* pos = initializer(p, "pos_embed");
  pos->mutable_raw_data()->resize(pos->raw_data().size() - 4);
  EXPECT_NE(load_error(write_proto(dir, p))
                .find("initializer 'pos_embed' holds 3260 bytes of data but its dims (1, "
                      "17, 48) and type float need 3264"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  p = golden_proto("timm_op17");
  pos = initializer(p, "pos_embed");
  pos->set_dims(1, int64_t{1} << 40);
  pos->set_dims(2, int64_t{1} << 40);
  EXPECT_NE(load_error(write_proto(dir, p)).find("initializer 'pos_embed': dims too large"), std::string::npos)
      << load_error(dir.file("m.onnx"));
  // a tensor claiming 2^40 values over 3264 bytes: refused by its size before anything is allocated
  pos->set_dims(1, int64_t{1} << 30);
  pos->set_dims(2, int64_t{1} << 10);
  EXPECT_NE(load_error(write_proto(dir, p))
                .find("holds 3264 bytes of data but its dims (1, 1073741824, 1024) and "
                      "type float need 4398046511104"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  pos->set_dims(1, -3);
  EXPECT_NE(load_error(write_proto(dir, p)).find("negative dim -3"), std::string::npos);
  pos->set_dims(1, 17);
  pos->set_dims(2, 48);
  pos->set_data_type(onnx::TensorProto::STRING);
  EXPECT_NE(load_error(write_proto(dir, p)).find("element type 8 (string), which vit does not read"), std::string::npos)
      << load_error(dir.file("m.onnx"));
}

TEST(OnnxHostile, ExternalDataOutsideTheModelsFolderIsRefused) {
  testing::TempDir dir;
  const auto external = [&](const std::string& location, const std::string& offset = "0") {
    onnx::ModelProto p = golden_proto("timm_op17");
    onnx::TensorProto* pos = initializer(p, "pos_embed");
    const std::string raw = pos->raw_data();
    pos->clear_raw_data();
    pos->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = pos->add_external_data();
    e->set_key("location");
    e->set_value(location);
    auto* o = pos->add_external_data();
    o->set_key("offset");
    o->set_value(offset);
    testing::write_bytes(dir.file("weights.bin"), std::vector<uint8_t>(raw.begin(), raw.end()));
    return write_proto(dir, p);
  };
  EXPECT_NE(load_error(external("../etc/passwd"))
                .find("external data location '../etc/passwd' leaves the model's "
                      "folder ('..')"),
            std::string::npos);
  EXPECT_NE(load_error(external("/etc/passwd")).find("is not a path relative to the model's folder"),
            std::string::npos);
  EXPECT_NE(load_error(external("missing.bin")).find("missing.bin"), std::string::npos);
  EXPECT_NE(load_error(external("weights.bin", "8")).find("lie past the end of 'weights.bin'"), std::string::npos)
      << load_error(dir.file("m.onnx"));
  ::symlink("/etc", dir.file("up").c_str());
  EXPECT_NE(load_error(external("up/passwd")).find("leads outside the model's folder"), std::string::npos)
      << load_error(dir.file("m.onnx"));
  // inside the folder, at the right size: read, and the model matches the file without external data
  const std::string inside = external("weights.bin");
  const io::WeightsFile expected = testing::load_golden("onnx/expected.safetensors");
  Predictor model = Predictor::load(inside);
  EXPECT_TRUE(testing::close_to_largest(model.predict(testing::golden(expected, "input", DType::F32)),
                                        testing::golden(expected, "timm.logits", DType::F32), kOnnxParity, "external"));
}

TEST(OnnxHostile, GraphsThatAreNoViTAreRefusedNamingWhatWasNotRecognised) {
  testing::TempDir dir;
  // an op outside a ViT graph
  onnx::ModelProto p = golden_proto("timm_op17");
  p.mutable_graph()->mutable_node(0)->set_op_type("Resize");
  EXPECT_NE(load_error(write_proto(dir, p)).find("op 'Resize' is not part of a ViT graph vit recognises"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  // a custom domain
  p = golden_proto("timm_op17");
  p.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  EXPECT_NE(load_error(write_proto(dir, p)).find("is in domain 'com.microsoft'"), std::string::npos);
  // no Softmax: no encoder block
  p = golden_proto("timm_op17");
  for (auto& n : *p.mutable_graph()->mutable_node())
    if (n.op_type() == "Softmax") n.set_op_type("Identity");
  EXPECT_NE(load_error(write_proto(dir, p)).find("no encoder block (LayerNorm, projections, Softmax)"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  // a graph of one Relu
  onnx::ModelProto tiny;
  tiny.set_ir_version(8);
  tiny.add_opset_import()->set_version(17);
  auto* g = tiny.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int i = 0; i < 4; ++i) shape->add_dim()->set_dim_value(2);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("y");
  EXPECT_NE(load_error(write_proto(dir, tiny))
                .find("node #0 (Relu) (an activation) where the patch embedding's Conv was expected"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  // a weight the pattern does not use: the logits times a (2, 10) table
  p = golden_proto("timm_op17");
  auto* extra = p.mutable_graph()->add_initializer();
  extra->set_name("extra");
  extra->set_data_type(onnx::TensorProto::FLOAT);
  extra->add_dims(2);
  extra->add_dims(10);
  for (int i = 0; i < 20; ++i) extra->add_float_data(1.0f);
  auto* mul = p.mutable_graph()->add_node();
  mul->set_op_type("Mul");
  mul->add_input(p.graph().output(0).name());
  mul->add_input("extra");
  mul->add_output("scaled");
  p.mutable_graph()->mutable_output(0)->set_name("scaled");
  EXPECT_NE(load_error(write_proto(dir, p)).find("constant 'extra' (2, 10) is used by the graph but is no weight"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
  // a subgraph (If) is refused by the reader
  p = golden_proto("timm_op17");
  auto* attr = p.mutable_graph()->mutable_node(0)->add_attribute();
  attr->set_name("then_branch");
  attr->set_type(onnx::AttributeProto::GRAPH);
  attr->mutable_g()->set_name("branch");
  EXPECT_NE(load_error(write_proto(dir, p)).find("holds a subgraph (attribute 'then_branch')"), std::string::npos);
}

TEST(OnnxHostile, MetadataThatDoesNotDescribeTheGraphIsRefused) {
  testing::TempDir dir;
  infer::ExportOptions options;
  LoadSettings heads;
  heads.num_heads = 4;
  export_onnx(std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors", dir.file("ours.onnx"), heads, options);
  onnx::ModelProto p;
  {
    std::ifstream in(dir.file("ours.onnx"), std::ios::binary);
    ASSERT_TRUE(p.ParseFromIstream(&in));
  }
  for (auto& kv : *p.mutable_metadata_props()) {
    if (kv.key() != "vit.config") continue;
    std::string v = kv.value();
    const size_t at = v.find("\"num_heads\":4");
    ASSERT_NE(at, std::string::npos) << v;
    v.replace(at, 13, "\"num_heads\":6");
    kv.set_value(v);
  }
  EXPECT_NE(load_error(write_proto(dir, p))
                .find("metadata 'vit.config' (eps 1e-06, gelu, 6 heads) does not describe "
                      "the graph (eps 1e-06, gelu, 4 heads)"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
}

// Hugging Face's query, key and value of different widths (the value's weight wider than the query's)
// are refused naming the block, never copied past the end of the stacked qkv.
TEST(OnnxHostile, QueryKeyValueOfDifferentWidthsAreRefused) {
  testing::TempDir dir;
  onnx::ModelProto p = golden_proto("hf_op16");
  int matmuls = 0;
  std::string value_weight;
  for (const auto& n : p.graph().node()) {
    if (n.op_type() != "MatMul" || n.input_size() != 2) continue;
    for (const auto& t : p.graph().initializer())
      if (t.name() == n.input(1) && ++matmuls == 3) value_weight = t.name();
    if (!value_weight.empty()) break;
  }
  ASSERT_FALSE(value_weight.empty());
  onnx::TensorProto* v = initializer(p, value_weight);
  ASSERT_EQ(v->dims(0), 48);
  v->set_dims(0, 56);  // (in, out) = (56, 48): a (48, 56) weight
  v->mutable_raw_data()->resize(56 * 48 * 4);
  EXPECT_NE(load_error(write_proto(dir, p))
                .find("block 0's query, key and value projections read inputs of different widths (48 and 56)"),
            std::string::npos)
      << load_error(dir.file("m.onnx"));
}

TEST(OnnxHostile, LoadOptionsThatDoNotApplyAreRefused) {
  LoadSettings layout;
  layout.layout = model::Layout::Timm;
  EXPECT_NE(
      testing::error_of([&] { (void)load_model(onnx_golden("timm_op17"), layout); }).find("--layout does not apply"),
      std::string::npos);
  LoadSettings heads;
  heads.num_heads = 6;
  EXPECT_NE(testing::error_of([&] { (void)load_model(onnx_golden("timm_op17"), heads); }).find("--heads 6 contradicts"),
            std::string::npos)
      << testing::error_of([&] { (void)load_model(onnx_golden("timm_op17"), heads); });
}

}  // namespace
}  // namespace vit::infer
