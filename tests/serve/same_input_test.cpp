// The same JPEG reaches a model as the same tensor through every door (issue 43): `vit predict`
// (--save-input writes what it gave the model), `vit eval` on an image folder (the library's evaluation batch, shaped
// as the command shapes it) and `vit serve` (/v1/predict with the image's bytes gives the probabilities of the logits
// `vit predict --tensor` computes from the saved input; /v2 with the bytes as a BYTES input, base64 in JSON and
// binary, and gRPC's ModelInfer give those logits within 1e-6 of the largest), for a vit checkpoint with its own
// recorded transform (shorter side, crop, bicubic) and for a timm classifier. The Python module's door (and through it
// the C++ facade's Model::load_image, which it wraps) is python/tests/test_vit.py
// (test_the_same_image_is_the_same_tensor_as_vit_predict_gives).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/loader.h"
#include "grpc_client.h"
#include "infer/load_model.h"
#include "infer/preprocess.h"
#include "io/npy.h"
#include "oip_client.h"
#include "serve_process.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

using testing::TempDir;

// Our checkpoint: RGB 32 px, 2 classes, evaluated as shorter side 36, centre crop 32, bicubic.
std::string write_own_model(const TempDir& dir) {
  testing::write_transform_checkpoint(dir.file("own.safetensors"));
  return dir.file("own.safetensors");
}

void expect_same_logits(const std::vector<float>& got, const std::vector<float>& want, const char* door) {
  ASSERT_EQ(got.size(), want.size()) << door;
  EXPECT_TRUE(testing::same_logits(got, want, 1e-6)) << door << ": not within 1e-6 of the largest logit";
}

std::vector<float> floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

TEST(SameInput, OneJpegIsOneTensorThroughPredictEvalAndServe) {
  TempDir dir;
  // One photo of 45 x 60 (not square), as JPEG, in an image folder of one class.
  data::Image photo{3, 45, 60, std::vector<uint8_t>(3 * 45 * 60)};
  for (size_t i = 0; i < photo.pixels.size(); ++i) photo.pixels[i] = static_cast<uint8_t>((i * 37 + i / 61) % 251);
  std::filesystem::create_directories(dir.file("folder/test/a"));
  std::filesystem::create_directories(dir.file("folder/train/a"));
  data::write_image(dir.file("folder/test/a/photo.jpg"), photo);
  data::write_image(dir.file("folder/train/a/photo.jpg"), photo);
  const std::string jpg = dir.file("folder/test/a/photo.jpg");
  struct Case {
    std::string model, flags, served;
  };
  const std::string own = write_own_model(dir);
  // One server for both: the timm file (ServeProcess's "timm") and ours as "own".
  ServeProcess server(dir, {"--model", "own=" + own, "--grpc-port", "0"});
  ASSERT_GT(server.port(), 0);
  for (const Case& c : {Case{own, "", "own"}, Case{kTimm, " --heads 4", "timm"}}) {
    SCOPED_TRACE(c.model);
    // vit predict
    const std::string saved = dir.file("input.npy");
    std::filesystem::remove(saved);
    const testing::CommandResult p =
        testing::vit("predict --checkpoint " + c.model + c.flags + " " + jpg + " --save-input " + saved);
    ASSERT_EQ(p.exit_code, 0) << p.out;
    const Tensor predicted = io::load_npy(saved);
    // vit eval's batch: the folder shaped by the model's transform, normalised by the loader
    infer::LoadSettings settings;
    settings.num_heads = c.flags.empty() ? 0 : 4;
    const infer::LoadedModel loaded = infer::load_model(c.model, settings);
    const infer::Preprocess& pre = loaded.preprocess;
    const int64_t channels = loaded.model->config().in_channels, size = loaded.model->config().image_size;
    const data::ImageShaper shaper = [&](const data::Image& image) {
      return infer::resize_and_crop(data::convert_channels(image, channels), pre);
    };
    const data::Dataset folder = data::load_dataset(dir.file("folder"), data::Split::Test, channels, size,
                                                    data::kDefaultMaxPixels, data::Residency::Stream, shaper);
    const data::Batch batch = data::make_batch(folder, {0}, {}, {pre.mean, pre.std}, false, 0);
    EXPECT_EQ(floats(batch.images), floats(predicted));
    // vit serve: the image's probabilities are those of the saved input's logits
    const testing::CommandResult l = testing::vit("predict --checkpoint " + c.model + c.flags + " --tensor " + saved +
                                                  " --out " + dir.file("logits.npy") + " --overwrite");
    ASSERT_EQ(l.exit_code, 0) << l.out;
    const std::vector<float> logits = floats(io::load_npy(dir.file("logits.npy")));
    httplib::Client client("127.0.0.1", server.port());
    const std::vector<uint8_t> bytes = testing::read_bytes(jpg);
    const auto answer = client.Post("/v1/predict?model=" + c.served + "&top_k=" + std::to_string(logits.size()),
                                    std::string(bytes.begin(), bytes.end()), "image/jpeg");
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->status, 200) << answer->body;
    double top = -1e300, total = 0;
    for (const float v : logits) top = std::max(top, static_cast<double>(v));
    for (const float v : logits) total += std::exp(static_cast<double>(v) - top);
    const nlohmann::json predictions = nlohmann::json::parse(answer->body).at("predictions");
    EXPECT_EQ(predictions.size(), logits.size());
    for (const auto& prediction : predictions) {
      const auto k = prediction.at("index").get<size_t>();
      const double expected = std::exp(static_cast<double>(logits.at(k)) - top) / total;
      EXPECT_NEAR(prediction.at("probability").get<double>(), expected, 1e-9) << "class " << k;
    }
    // /v2: the JPEG's bytes as a BYTES input, base64 in JSON and binary, give the same logits.
    const std::string jpeg(bytes.begin(), bytes.end()), path = "/v2/models/" + c.served + "/infer";
    const auto json_answer = testing::post_infer(client, path, testing::image_request({jpeg}, false));
    ASSERT_TRUE(json_answer && json_answer->status == 200) << (json_answer ? json_answer->body : "no answer");
    expect_same_logits(testing::first_output(json_answer), logits, "/v2 JSON base64");
    const auto binary_answer = testing::post_infer(client, path, testing::image_request({jpeg}, true));
    ASSERT_TRUE(binary_answer && binary_answer->status == 200) << (binary_answer ? binary_answer->body : "no answer");
    expect_same_logits(testing::first_output(binary_answer), logits, "/v2 binary");
    // gRPC: ModelInfer with the bytes as a BYTES input.
    ASSERT_GT(server.grpc_port(), 0) << server.log();
    inference::ModelInferResponse reply;
    grpc::ClientContext context;
    const grpc::Status status = testing::grpc_stub(server.grpc_port())
                                    ->ModelInfer(&context, testing::grpc_image_request(c.served, {jpeg}), &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    expect_same_logits(testing::grpc_first_output(reply), logits, "gRPC");
  }
}

}  // namespace
}  // namespace vit
