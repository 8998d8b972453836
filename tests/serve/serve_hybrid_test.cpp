// `vit serve` with the main job's model, a hybrid (convolutions with BatchNorm folded in, then the
// transformer): served beside another model, its metadata (1x28x28 input, 10 logits, the width of
// its embedding) and JSON requests answered with `vit predict --tensor`'s logits. (4 heads: the
// served models share ServeProcess's --heads 4, which a file recording another count refuses.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "io/npy.h"
#include "serve/serve_process.h"

namespace vit {
namespace {

using json = nlohmann::json;

TEST(ServeHybrid, MetadataAndLogitsAreVitPredicts) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.file("digits"), 96, 32);
  const auto trained = testing::vit("train --preset vit_hybrid_fashion --conv-channels 8 --dim 16 --heads 4 --data " +
                                    dir.file("digits") + " --out " + dir.file("run") +
                                    " --batch-size 32 --threads 1 --plain --ema 0 --epochs 1");
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  const std::string checkpoint = dir.file("run/last.safetensors");
  Generator gen(5);
  const Tensor x = Tensor::randn({2, 1, 28, 28}, gen);
  io::save_npy(dir.file("x.npy"), x);
  const auto predicted = testing::vit("predict --checkpoint " + checkpoint + " --tensor " + dir.file("x.npy") +
                                      " --out " + dir.file("logits.npy"));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;
  const Tensor expected = io::load_npy(dir.file("logits.npy"));
  ASSERT_EQ(expected.numel(), 20);

  ServeProcess server(dir, {"--model", "hybrid=" + checkpoint});
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(60, 0);
  const auto meta = c.Get("/v2/models/hybrid");
  ASSERT_TRUE(meta);
  ASSERT_EQ(meta->status, 200) << meta->body;
  const json m = json::parse(meta->body);
  EXPECT_EQ(m["inputs"][0]["shape"], json({-1, 1, 28, 28}));
  EXPECT_EQ(m["outputs"][0]["name"], "logits");
  EXPECT_EQ(m["outputs"][0]["shape"], json({-1, 10}));
  EXPECT_EQ(m["outputs"][1]["shape"], json({-1, 16}));

  const std::vector<float> values(x.data<float>(), x.data<float>() + x.numel());
  const json request = {
      {"inputs", {{{"name", "input"}, {"shape", {2, 1, 28, 28}}, {"datatype", "FP32"}, {"data", values}}}},
      {"outputs", {{{"name", "logits"}}}}};
  const auto r = c.Post("/v2/models/hybrid/infer", request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a = json::parse(r->body);
  ASSERT_EQ(a["outputs"].size(), 1u) << r->body;
  EXPECT_EQ(a["outputs"][0]["shape"], json({2, 10}));
  const auto got = a["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(got.size(), 20u);
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = expected.data<float>()[i];
    EXPECT_NEAR(got[i], want, 1e-5 * std::max(1.0f, std::fabs(want))) << i;
  }
  // A grey model refuses a colour batch, naming what it takes.
  json colour = request;
  colour["inputs"][0]["shape"] = {2, 3, 28, 28};
  colour["inputs"][0]["data"] = std::vector<float>(2 * 3 * 28 * 28, 0.5f);
  const auto bad = c.Post("/v2/models/hybrid/infer", colour.dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_NE(bad->body.find("the model takes [B, 1, 28, 28]"), std::string::npos) << bad->body;
}

}  // namespace
}  // namespace vit
