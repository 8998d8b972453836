// `vit serve` speaking the Open Inference Protocol (KServe v2), checked by a client written from
// the protocol's text (the request and answer shapes, the binary tensor data extension's
// Inference-Header-Content-Length and binary_data_size, Triton's classification extension), not
// from our code: JSON and binary requests give `vit predict --tensor`'s logits, metadata matches
// the model, errors are {"error": ...} with a 4xx status; two models are served at once, each by
// name; the page at / is self-contained; garbage from 64 clients leaves the others' answers intact.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/random.h"
#include "data/image.h"
#include "io/npy.h"
#include "serve/serve_process.h"

namespace vit {
namespace {

using json = nlohmann::json;
using testing::TempDir;

const std::string kJax = std::string(VIT_GOLDEN_DIR) + "/pth/jax.npz";  // the same weights as kTimm, JAX names

// The spec's inference request: one FP32 input, JSON data (flat, row-major).
json infer_json(const std::vector<float>& x, const std::vector<int64_t>& shape, const json& outputs = nullptr) {
  json r = {{"id", "req-7"}, {"inputs", {{{"name", "input"}, {"shape", shape}, {"datatype", "FP32"}, {"data", x}}}}};
  if (!outputs.is_null()) r["outputs"] = outputs;
  return r;
}

// The binary extension: the JSON header, then the raw little-endian tensor bytes.
std::pair<std::string, std::string> infer_binary(const std::vector<float>& x, const std::vector<int64_t>& shape,
                                                 const json& outputs) {
  const json header = {{"inputs",
                        {{{"name", "input"},
                          {"shape", shape},
                          {"datatype", "FP32"},
                          {"parameters", {{"binary_data_size", x.size() * 4}}}}}},
                       {"outputs", outputs}};
  const std::string text = header.dump();
  std::string body = text;
  body.append(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  return {body, std::to_string(text.size())};
}

class ServeV2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new ServeProcess(*dir_, {"--model", "jax=" + kJax});
    Generator gen(11);
    const Tensor x = Tensor::randn({3, 3, 32, 32}, gen);
    x_.assign(x.data<float>(), x.data<float>() + x.numel());
    io::save_npy(dir_->file("x.npy"), x);
    const auto r = testing::vit("predict --checkpoint " + kTimm + " --heads 4 --tensor " + dir_->file("x.npy") +
                                " --out " + dir_->file("logits.npy"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const Tensor l = io::load_npy(dir_->file("logits.npy"));
    logits_.assign(l.data<float>(), l.data<float>() + l.numel());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  static httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  static void expect_logits(const std::vector<float>& got, const std::string& what) {
    ASSERT_EQ(got.size(), logits_.size()) << what;
    double top = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      top = std::max(top, std::fabs(static_cast<double>(logits_[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - logits_[i]));
    }
    EXPECT_LE(worst, 1e-5 * std::max(1.0, top)) << what;
  }
  // A 4xx answer shaped as the spec says: {"error": "..."} mentioning `text`.
  static void expect_error(const httplib::Result& r, int status, const std::string& text) {
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string()) << r->body;
    EXPECT_NE(j["error"].get<std::string>().find(text), std::string::npos) << r->body;
  }
  static TempDir* dir_;
  static ServeProcess* server_;
  static std::vector<float> x_, logits_;
};
TempDir* ServeV2::dir_ = nullptr;
ServeProcess* ServeV2::server_ = nullptr;
std::vector<float> ServeV2::x_, ServeV2::logits_;

TEST_F(ServeV2, HealthServerAndModelMetadata) {
  auto c = client();
  for (const char* path : {"/v2/health/live", "/v2/health/ready", "/v2/models/timm/ready", "/v2/models/jax/ready",
                           "/v2/models/timm/versions/1/ready"}) {
    const auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
  const auto server = c.Get("/v2");
  ASSERT_TRUE(server);
  const json s = json::parse(server->body);
  EXPECT_EQ(s["name"], "vit");
  EXPECT_TRUE(s["version"].is_string());
  EXPECT_NE(std::find(s["extensions"].begin(), s["extensions"].end(), "binary_tensor_data"), s["extensions"].end());
  for (const char* path : {"/v2/models/timm", "/v2/models/timm/versions/1"}) {
    const auto r = c.Get(path);
    ASSERT_TRUE(r);
    const json m = json::parse(r->body);
    EXPECT_EQ(m["name"], "timm");
    EXPECT_EQ(m["versions"], json({"1"}));
    EXPECT_EQ(m["inputs"][0]["name"], "input");
    EXPECT_EQ(m["inputs"][0]["datatype"], "FP32");
    EXPECT_EQ(m["inputs"][0]["shape"], json({-1, 3, 32, 32}));
    EXPECT_EQ(m["outputs"][0]["name"], "logits");
    EXPECT_EQ(m["outputs"][0]["shape"], json({-1, 10}));
    EXPECT_EQ(m["outputs"][1]["name"], "embedding");
    EXPECT_EQ(m["outputs"][1]["shape"], json({-1, 48}));
  }
}

TEST_F(ServeV2, JsonAndBinaryRequestsGiveVitPredictsLogits) {
  auto c = client();
  // JSON in, JSON out; the id comes back.
  const auto r = c.Post("/v2/models/timm/infer", infer_json(x_, {3, 3, 32, 32}, {{{"name", "logits"}}}).dump(),
                        "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a = json::parse(r->body);
  EXPECT_EQ(a["id"], "req-7");
  EXPECT_EQ(a["model_name"], "timm");
  ASSERT_EQ(a["outputs"].size(), 1u);
  EXPECT_EQ(a["outputs"][0]["name"], "logits");
  EXPECT_EQ(a["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(a["outputs"][0]["shape"], json({3, 10}));
  expect_logits(a["outputs"][0]["data"].get<std::vector<float>>(), "JSON");

  // Binary in, binary out: the answer's JSON header, then binary_data_size bytes of logits.
  const auto [body, length] =
      infer_binary(x_, {3, 3, 32, 32}, {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}}});
  httplib::Headers h = {{"Inference-Header-Content-Length", length}};
  const auto b = c.Post("/v2/models/jax/infer", h, body, "application/octet-stream");
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  const size_t n = std::stoul(b->get_header_value("Inference-Header-Content-Length"));
  const json bj = json::parse(b->body.substr(0, n));
  EXPECT_EQ(bj["model_name"], "jax");
  const size_t bytes = bj["outputs"][0]["parameters"]["binary_data_size"].get<size_t>();
  ASSERT_EQ(bytes, logits_.size() * 4);
  ASSERT_EQ(b->body.size(), n + bytes);
  std::vector<float> got(logits_.size());
  std::memcpy(got.data(), b->body.data() + n, bytes);
  expect_logits(got, "binary, the JAX copy of the same weights");

  // Data nested to the shape is read as row-major too; no "outputs": every output, logits first.
  json nested = json::array();
  for (int b0 = 0; b0 < 3; ++b0) {
    json img = json::array();
    for (int ch = 0; ch < 3; ++ch) {
      json rows = json::array();
      for (int y = 0; y < 32; ++y) {
        const auto* row = x_.data() + ((b0 * 3 + ch) * 32 + y) * 32;
        rows.push_back(std::vector<float>(row, row + 32));
      }
      img.push_back(rows);
    }
    nested.push_back(img);
  }
  json req = infer_json(x_, {3, 3, 32, 32});
  req["inputs"][0]["data"] = nested;
  const auto all = c.Post("/v2/models/timm/infer", req.dump(), "application/json");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->status, 200) << all->body;
  const json aj = json::parse(all->body);
  ASSERT_EQ(aj["outputs"].size(), 2u);
  expect_logits(aj["outputs"][0]["data"].get<std::vector<float>>(), "nested data");
  EXPECT_EQ(aj["outputs"][1]["name"], "embedding");
  EXPECT_EQ(aj["outputs"][1]["shape"], json({3, 48}));
}

TEST_F(ServeV2, ClassificationAnswersTopKAsBytes) {
  auto c = client();
  const json outputs = {{{"name", "logits"}, {"parameters", {{"classification", 3}, {"binary_data", true}}}}};
  const auto [body, length] = infer_binary(x_, {3, 3, 32, 32}, outputs);
  const auto r =
      c.Post("/v2/models/timm/infer", {{"Inference-Header-Content-Length", length}}, body, "application/octet-stream");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const size_t n = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  const json j = json::parse(r->body.substr(0, n));
  EXPECT_EQ(j["outputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(j["outputs"][0]["shape"], json({3, 3}));
  // BYTES in binary: each element a 4-byte little-endian length, then its bytes ("score:index:label").
  const std::string data = r->body.substr(n);
  size_t at = 0;
  for (int row = 0; row < 3; ++row) {
    for (int k = 0; k < 3; ++k) {
      ASSERT_LE(at + 4, data.size());
      uint32_t len = 0;
      std::memcpy(&len, data.data() + at, 4);
      const std::string s = data.substr(at + 4, len);
      at += 4 + len;
      if (k == 0) {  // the top class is the largest logit of the row
        const auto* l = logits_.data() + row * 10;
        const auto best = std::max_element(l, l + 10) - l;
        EXPECT_EQ(s.substr(s.find(':') + 1), fmt::format("{}:{}", best, best)) << s;
      }
    }
  }
  EXPECT_EQ(at, data.size());
}

TEST_F(ServeV2, MalformedRequestsAre4xxAndTheServerStaysUp) {
  auto c = client();
  const std::string url = "/v2/models/timm/infer";
  json bad = infer_json(x_, {3, 3, 32, 32});
  bad["inputs"][0]["datatype"] = "INT8";
  expect_error(c.Post(url, bad.dump(), "application/json"), 400, "datatype INT8");
  json short_data = infer_json(std::vector<float>(x_.begin(), x_.begin() + 100), {3, 3, 32, 32});
  expect_error(c.Post(url, short_data.dump(), "application/json"), 400, "needs 9216 values");
  json negative = infer_json(x_, {-3, 3, 32, 32});
  expect_error(c.Post(url, negative.dump(), "application/json"), 400, "negative size");
  json wrong_shape = infer_json(x_, {3, 3, 16, 64});
  expect_error(c.Post(url, wrong_shape.dump(), "application/json"), 400, "the model takes [B, 3, 32, 32]");
  json wrong_name = infer_json(x_, {3, 3, 32, 32});
  wrong_name["inputs"][0]["name"] = "pixels";
  expect_error(c.Post(url, wrong_name.dump(), "application/json"), 400, "unknown input 'pixels'");
  const auto [body, length] = infer_binary(x_, {3, 3, 32, 32}, json::array());
  expect_error(c.Post(url, {{"Inference-Header-Content-Length", std::to_string(body.size() + 1)}}, body,
                      "application/octet-stream"),
               400, "past the end");
  expect_error(c.Post(url, {{"Inference-Header-Content-Length", length}}, body.substr(0, body.size() - 4),
                      "application/octet-stream"),
               400, "bytes of binary data expected");
  expect_error(c.Post(url, std::string(100000, '[') + std::string(100000, ']'), "application/json"), 400,
               "nests arrays/objects more than 64 deep");
  expect_error(c.Post(url, "{\"inputs\": [", "application/json"), 400, "not valid JSON");
  expect_error(c.Post("/v2/models/nope/infer", infer_json(x_, {3, 3, 32, 32}).dump(), "application/json"), 404,
               "unknown model 'nope'");
  expect_error(c.Post("/v2/models/timm/versions/3/infer", infer_json(x_, {3, 3, 32, 32}).dump(), "application/json"),
               404, "unknown version '3'");
  expect_error(c.Get(url), 405, "takes POST");
  expect_error(c.Post("/v1/predict", "x", "image/png"), 400, "name one with ?model=NAME");
  expect_error(c.Post("/v1/predict?model=nope", "x", "image/png"), 404, "unknown model 'nope' (served: timm, jax)");
  const auto health = c.Get("/v2/health/live");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServeV2, GarbageFrom64ClientsLeavesTheOthersAnswersIntact) {
  std::atomic<int> garbage_4xx{0}, garbage_other{0}, good{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&, t] {
      auto c = client();
      Generator gen(100 + t);
      for (int i = 0; i < 4; ++i) {
        std::string junk(64 + 97 * (t + i), '\0');
        for (char& ch : junk) ch = static_cast<char>(Tensor::rand({1}, gen).item() * 256);
        const auto r = c.Post("/v2/models/" + std::string(t % 2 ? "timm" : "jax") + "/infer",
                              {{"Inference-Header-Content-Length", std::to_string(t * 3)}}, junk, "application/json");
        if (r && r->status >= 400 && r->status < 500) {
          ++garbage_4xx;
        } else {
          ++garbage_other;
          ADD_FAILURE() << (r ? fmt::format("{}: {}", r->status, r->body) : httplib::to_string(r.error()));
        }
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto c = client();
      for (int i = 0; i < 8; ++i) {
        const auto r = c.Post("/v2/models/timm/infer", infer_json(x_, {3, 3, 32, 32}, {{{"name", "logits"}}}).dump(),
                              "application/json");
        if (!r || r->status != 200) {
          ++wrong;
          continue;
        }
        const auto got = json::parse(r->body)["outputs"][0]["data"].get<std::vector<float>>();
        bool same = got.size() == logits_.size();
        for (size_t k = 0; same && k < got.size(); ++k) same = std::fabs(got[k] - logits_[k]) <= 1e-5;
        (same ? good : wrong)++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(garbage_4xx.load(), 64 * 4);
  EXPECT_EQ(garbage_other.load(), 0);
  EXPECT_EQ(good.load(), 32);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ServeV2, ThePageIsSelfContainedAndItsEndpointsAnswer) {
  auto c = client();
  const auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("<script>"), std::string::npos);
  for (const char* external : {"http://", "https://", "src=\"//", "@import"}) {
    EXPECT_EQ(page->body.find(external), std::string::npos) << "the page loads something from outside: " << external;
  }
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body)["models"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["name"], "timm");
  EXPECT_EQ(m[1]["name"], "jax");
  EXPECT_EQ(m[1]["layout"], "jax");
  EXPECT_EQ(m[0]["classes"], 10);
  EXPECT_EQ(m[0]["embedding"], 48);
  // The attention picture of an image: a PNG.
  data::Image photo{3, 40, 50, std::vector<uint8_t>(3 * 40 * 50)};
  for (size_t i = 0; i < photo.pixels.size(); ++i) photo.pixels[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> png = data::encode_png(photo);
  const auto a = c.Post("/v1/attention?model=jax", std::string(png.begin(), png.end()), "image/png");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_EQ(a->get_header_value("Content-Type"), "image/png");
  EXPECT_EQ(a->body.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto p = c.Post("/v1/predict?model=jax&top_k=2", std::string(png.begin(), png.end()), "image/png");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 200) << p->body;
}

TEST(ServeModels, AModelThatDoesNotLoadIsNamedOrSkipped) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("repo"));
  std::filesystem::copy_file(kJax, dir.file("repo/good.npz"));
  testing::write_bytes(dir.file("repo/broken.pth"), {'P', 'K', 3, 4, 0, 0});
  testing::expect_error(testing::vit("serve --model-dir " + dir.file("repo") + " --port 0"),
                        "[serve] model 'broken' (" + dir.file("repo/broken.pth") + ") does not load: [zip]");
  testing::expect_error(testing::vit("serve --model a=" + kTimm + " --model a=" + kJax + " --heads 4 --port 0"),
                        "[serve] two models are named 'a'");
  testing::expect_error(testing::vit("serve --model bad/name=" + kJax + " --port 0"), "[serve] model name 'bad/name'");
  testing::expect_error(testing::vit("serve --model " + kJax + " --port 0"),
                        "[serve] --model " + kJax + ": give NAME=FILE");
  testing::expect_error(testing::vit("serve --port 0"), "[serve] no model to serve");
  ServeProcess server(dir, {"--model-dir", dir.file("repo"), "--skip-failed-models"});
  EXPECT_NE(server.log().find("warning: [serve] model 'broken'"), std::string::npos) << server.log();
  httplib::Client c("127.0.0.1", server.port());
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body)["models"];
  ASSERT_EQ(m.size(), 2u);  // --checkpoint's timm, and the repository's good
  EXPECT_EQ(m[1]["name"], "good");
}

}  // namespace
}  // namespace vit

namespace vit {
namespace {

// The server never reads a checkpoint again once serving: a deploy truncating the file under it
// changes no answer and crashes nothing, /v1/attention (the autograd model) included.
TEST(ServeModels, ATruncatedCheckpointChangesNothingServed) {
  TempDir dir;
  std::filesystem::copy_file(kJax, dir.file("model.npz"));
  std::filesystem::copy_file(kTimm, dir.file("model.safetensors"));
  ServeProcess server(dir, {"--model", "mapped=" + dir.file("model.safetensors")});
  httplib::Client c("127.0.0.1", server.port());
  data::Image photo{3, 40, 50, std::vector<uint8_t>(3 * 40 * 50)};
  for (size_t i = 0; i < photo.pixels.size(); ++i) photo.pixels[i] = static_cast<uint8_t>(i * 13);
  const std::vector<uint8_t> png = data::encode_png(photo);
  const std::string body(png.begin(), png.end());
  const auto before = c.Post("/v1/attention?model=mapped", body, "image/png");
  const auto predicted = c.Post("/v1/predict?model=mapped", body, "image/png");
  ASSERT_TRUE(before && predicted);
  ASSERT_EQ(before->status, 200) << before->body;
  std::filesystem::resize_file(dir.file("model.safetensors"), 0);
  const auto after = c.Post("/v1/attention?model=mapped", body, "image/png");
  ASSERT_TRUE(after) << "the server died: " << server.log();
  EXPECT_EQ(after->status, 200) << after->body;
  EXPECT_EQ(after->body, before->body);
  const auto again = c.Post("/v1/predict?model=mapped", body, "image/png");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body, predicted->body);
}

}  // namespace
}  // namespace vit
