// Encoded images on the Open Inference Protocol (issue 44): a BYTES input of JPEG/PNG/BMP bytes,
// base64 in JSON or binary, several images of different sizes in one request, each row the logits
// of that image sent alone; the metadata lists the input; every malformed image request is a 400
// naming what was wrong, and the server stays up.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "data/image.h"
#include "oip_client.h"
#include "serve_process.h"

namespace vit {
namespace {

using json = nlohmann::json;
using testing::TempDir;

std::string encoded(const TempDir& dir, int64_t h, int64_t w, const std::string& ext, int seed) {
  data::Image image{3, h, w, std::vector<uint8_t>(static_cast<size_t>(3 * h * w))};
  for (size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = static_cast<uint8_t>((i * 31 + seed * 7 + i / 5) % 253);
  const std::string path = dir.file("image" + std::to_string(seed) + "." + ext);
  data::write_image(path, image);
  const std::vector<uint8_t> bytes = testing::read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

std::string error_text(const httplib::Result& r) {
  if (!r) return "(no answer)";
  const json j = json::parse(r->body, nullptr, false);
  return std::to_string(r->status) + " " +
         (j.is_object() && j.contains("error") ? j["error"].get<std::string>() : r->body);
}

TEST(ServeImages, SeveralImagesOfDifferentSizesInOneRequestAreEachTheirOwnRow) {
  TempDir dir;
  ServeProcess server(dir, {});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const std::vector<std::string> images = {encoded(dir, 45, 60, "jpg", 1), encoded(dir, 20, 33, "png", 2),
                                           encoded(dir, 70, 40, "bmp", 3)};
  const std::string path = "/v2/models/timm/infer";
  std::vector<std::vector<float>> alone;
  for (const std::string& image : images) {
    alone.push_back(testing::first_output(testing::post_infer(client, path, testing::image_request({image}, false))));
    ASSERT_EQ(alone.back().size(), 10u);
  }
  for (bool binary : {false, true}) {
    SCOPED_TRACE(binary ? "binary" : "JSON");
    const auto r = testing::post_infer(client, path, testing::image_request(images, binary));
    ASSERT_TRUE(r && r->status == 200) << error_text(r);
    const json a = json::parse(r->body);
    EXPECT_EQ(a["id"], "img");
    EXPECT_EQ(a["outputs"][0]["shape"], json({3, 10}));
    const std::vector<float> rows = a["outputs"][0]["data"].get<std::vector<float>>();
    for (size_t i = 0; i < images.size(); ++i) {
      EXPECT_TRUE(testing::same_logits({rows.begin() + 10 * i, rows.begin() + 10 * (i + 1)}, alone[i], 1e-5))
          << "image " << i;
    }
  }
  // "input" with datatype BYTES is taken the same way, and shape [B, 1] too.
  json request = json::parse(testing::image_request(images, false).body);
  request["inputs"][0]["name"] = "input";
  request["inputs"][0]["shape"] = {3, 1};
  EXPECT_EQ(testing::first_output(client.Post(path, request.dump(), "application/json")).size(), 30u);
  // The metadata lists the BYTES input.
  const json md = json::parse(client.Get("/v2/models/timm")->body);
  EXPECT_EQ(md["inputs"][1], json({{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}}));
}

TEST(ServeImages, MalformedImageRequestsAre400NamingWhatWasWrong) {
  TempDir dir;
  ServeProcess server(dir, {});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const std::string path = "/v2/models/timm/infer", jpg = encoded(dir, 30, 30, "jpg", 4);
  auto with = [&](const std::function<void(json&)>& edit) {
    json r = json::parse(testing::image_request({jpg}, false).body);
    edit(r);
    return client.Post(path, r.dump(), "application/json");
  };
  struct Case {
    std::string what;
    httplib::Result answer;
    std::string expected;
  };
  const std::string binary_ok = testing::bytes_element(jpg);
  std::vector<Case> cases;
  cases.push_back({"not base64", with([](json& r) { r["inputs"][0]["data"] = {"@@@@"}; }),
                   "element 0: not base64 (character '@' at offset 0)"});
  cases.push_back({"not an image", with([](json& r) { r["inputs"][0]["data"] = {testing::base64("hello world")}; }),
                   "image 0 of the request: cannot decode"});
  cases.push_back({"empty", with([](json& r) { r["inputs"][0]["data"] = {""}; }), "image 0 of the request is empty"});
  cases.push_back({"count", with([](json& r) { r["inputs"][0]["shape"] = {2}; }), "needs 2 images, \"data\" has 1"});
  cases.push_back({"numbers", with([](json& r) { r["inputs"][0]["data"] = {1, 2}; }), "must hold base64 strings"});
  cases.push_back({"shape", with([](json& r) {
                     r["inputs"][0]["shape"] = {1, 3, 32, 32};
                   }),
                   "BYTES images are [B] (or [B, 1])"});
  cases.push_back({"FP32 image", with([](json& r) { r["inputs"][0]["datatype"] = "FP32"; }),
                   "input 'image': datatype FP32 (the model takes BYTES: encoded images)"});
  cases.push_back({"empty batch", with([](json& r) {
                     r["inputs"][0]["shape"] = {0};
                     r["inputs"][0]["data"] = json::array();
                   }),
                   "the batch is empty"});
  const std::string head =
      R"({"inputs":[{"name":"image","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":)";
  for (const auto& [what, data, expected] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"length past the end", binary_ok.substr(0, 40), "element 0 says"},
           {"cut length", std::string("\x05\x00", 2), "element 0 is cut off in its 4-byte length"},
           {"extra element", binary_ok + binary_ok, "has 1 elements but the data hold more"}}) {
    const std::string json_head = head + std::to_string(data.size()) + "}}]}";
    cases.push_back({what,
                     client.Post(path, {{"Inference-Header-Content-Length", std::to_string(json_head.size())}},
                                 json_head + data, "application/octet-stream"),
                     expected});
  }
  for (const Case& c : cases) {
    ASSERT_TRUE(c.answer) << c.what;
    EXPECT_EQ(c.answer->status, 400) << c.what << ": " << c.answer->body;
    EXPECT_NE(error_text(c.answer).find(c.expected), std::string::npos) << c.what << ": " << error_text(c.answer);
  }
  // Up and answering.
  EXPECT_EQ(testing::first_output(testing::post_infer(client, path, testing::image_request({jpg}, true))).size(), 10u);
}

}  // namespace
}  // namespace vit
