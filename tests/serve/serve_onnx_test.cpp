// `vit serve` with ONNX files as its models: a `vit export` of the timm test model and PyTorch's
// export of a torchvision ViT, each answering /v2 tensor requests with the logits `vit predict`
// gives for the same file, and the metadata naming their input and outputs.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "serve/oip_client.h"
#include "serve/serve_process.h"

namespace vit {
namespace {

using testing::TempDir;

std::vector<float> floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

TEST(ServeOnnx, ExportedAndTorchOnnxFilesAnswerAsVitPredict) {
  TempDir dir;
  const testing::CommandResult e = testing::vit("export " + kTimm + " --heads 4 " + dir.file("timm.onnx"));
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const std::string torchvision = std::string(VIT_GOLDEN_DIR) + "/onnx/torchvision_op14.onnx";
  ServeProcess server(dir, {"--model", "exported=" + dir.file("timm.onnx"), "--model", "tv=" + torchvision});
  ASSERT_GT(server.port(), 0);
  Generator gen(4);
  const Tensor x = Tensor::randn({1, 3, 32, 32}, gen);
  io::save_npy(dir.file("x.npy"), x);
  httplib::Client client("127.0.0.1", server.port());
  for (const auto& [name, file] : {std::pair{std::string("exported"), dir.file("timm.onnx")}, {"tv", torchvision}}) {
    SCOPED_TRACE(name);
    const testing::CommandResult p = testing::vit("predict --checkpoint " + file + " --tensor " + dir.file("x.npy") +
                                                  " --out " + dir.file("y.npy") + " --overwrite");
    ASSERT_EQ(p.exit_code, 0) << p.out;
    const std::vector<float> want = floats(io::load_npy(dir.file("y.npy")));
    const nlohmann::json request = {
        {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {1, 3, 32, 32}}, {"data", floats(x)}}}},
        {"outputs", {{{"name", "logits"}}}}};
    const auto r = client.Post("/v2/models/" + name + "/infer", request.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_TRUE(testing::same_logits(testing::first_output(r), want, 1e-6));
    const auto meta = client.Get("/v2/models/" + name);
    ASSERT_TRUE(meta);
    EXPECT_NE(meta->body.find("\"logits\""), std::string::npos) << meta->body;
  }
}

// A model folder holding an export with external data: the .onnx is the model, its .onnx.data is not.
TEST(ServeOnnx, ExternalDataInAModelFolderIsNoModel) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("repo"));
  const testing::CommandResult e =
      testing::vit("export " + kTimm + " --heads 4 " + dir.file("repo/ext.onnx") + " --external-data");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  ServeProcess server(dir, {"--model-dir", dir.file("repo")});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const auto ext = client.Get("/v2/models/ext/ready");
  ASSERT_TRUE(ext);
  EXPECT_EQ(ext->status, 200);
  const auto data = client.Get("/v2/models/ext.onnx/ready");
  ASSERT_TRUE(data);
  EXPECT_EQ(data->status, 404);
}

}  // namespace
}  // namespace vit
