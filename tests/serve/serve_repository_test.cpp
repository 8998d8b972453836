// The model repository of `vit serve` (issue 44), through HTTP as Triton documents it: under
// --model-control poll a changed file is loaded as the next version and swapped in while clients
// keep asking (no request fails, every answer is the old or the new version's); under explicit,
// load/unload on request, versions addressable, a file that does not load leaves the serving
// version in place and is reported by the index; under none, load/unload are refused.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/random.h"
#include "oip_client.h"
#include "serve_process.h"
#include "support/tiny_checkpoint.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

// A (1, 3, 32, 32) input as a binary FP32 request asking for the logits.
testing::OipBody tensor_request(const std::vector<float>& x) {
  const json head = {{"inputs",
                      {{{"name", "input"},
                        {"shape", {1, 3, 32, 32}},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", x.size() * 4}}}}}},
                     {"outputs", {{{"name", "logits"}}}}};
  const std::string text = head.dump();
  return {text + std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4), std::to_string(text.size())};
}

// Puts `from` in place as `to` the way deploys should: written beside it, then renamed in.
void deploy(const std::string& from, const std::string& to) {
  const std::string tmp = fs::path(to).parent_path() / ".incoming";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

json model_index(httplib::Client& client) {
  const auto r = client.Post("/v2/repository/index", "", "application/json");
  return r && r->status == 200 ? json::parse(r->body) : json();
}

std::string state_of(const json& index, const std::string& name, const char* field) {
  for (const json& m : index) {
    if (m["name"] == name) return m.contains(field) ? m[field].get<std::string>() : "";
  }
  return "(absent)";
}

TEST(ServeRepository, PollSwapsVersionsUnderLoadWithoutAFailedRequest) {
  TempDir dir;
  testing::write_transform_checkpoint(dir.file("own.safetensors"));  // 2 classes; timm has 10
  fs::create_directories(dir.file("repo"));
  deploy(kTimm, dir.file("repo/m.safetensors"));
  ServeProcess server(dir, {"--model", "own=" + dir.file("own.safetensors"), "--model-dir", dir.file("repo"),
                            "--model-control", "poll", "--repository-poll-secs", "0.2"});
  ASSERT_GT(server.port(), 0);
  Generator gen(5);
  const Tensor t = Tensor::randn({1, 3, 32, 32}, gen);
  const std::vector<float> x(t.data<float>(), t.data<float>() + t.numel());
  httplib::Client client("127.0.0.1", server.port());
  const testing::OipBody body = tensor_request(x);
  const std::vector<float> timm = testing::first_output(testing::post_infer(client, "/v2/models/timm/infer", body));
  const std::vector<float> own = testing::first_output(testing::post_infer(client, "/v2/models/own/infer", body));
  ASSERT_EQ(timm.size(), 10u);
  ASSERT_EQ(own.size(), 2u);

  std::atomic<bool> stop{false};
  std::mutex m;
  std::vector<std::string> problems;
  std::set<std::string> versions;
  std::atomic<int64_t> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      httplib::Client mine("127.0.0.1", server.port());
      mine.set_read_timeout(60, 0);
      while (!stop) {
        const auto r = testing::post_infer(mine, "/v2/models/m/infer", body);
        std::lock_guard lock(m);
        if (!r || r->status != 200) {
          problems.push_back(r ? std::to_string(r->status) + " " + r->body : "no answer");
          continue;
        }
        const json a = json::parse(r->body);
        const std::string v = a["model_version"].get<std::string>();
        versions.insert(v);
        // Odd versions are the timm file, even ones ours.
        const std::vector<float> got = a["outputs"][0]["data"].get<std::vector<float>>();
        if (!testing::same_logits(got, std::stoi(v) % 2 == 1 ? timm : own, 1e-5)) {
          problems.push_back("version " + v + " answered logits of neither version");
        }
        ++answered;
      }
    });
  }
  for (int swap = 2; swap <= 5; ++swap) {
    deploy(swap % 2 == 1 ? kTimm : dir.file("own.safetensors"), dir.file("repo/m.safetensors"));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state_of(model_index(client), "m", "version") != std::to_string(swap) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(state_of(model_index(client), "m", "version"), std::to_string(swap)) << server.log();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // answers from the new version
  }
  stop = true;
  for (std::thread& c : clients) c.join();
  EXPECT_TRUE(problems.empty()) << problems.size() << " failed or wrong, the first: " << problems.front();
  EXPECT_GT(answered.load(), 20);
  EXPECT_TRUE(versions.count("5")) << "the last version answered";
  EXPECT_NE(server.log().find("model 'm' version 5 loaded"), std::string::npos) << server.log();
  for (int v = 1; v <= 4; ++v) {  // each swapped-out version freed after its last request
    EXPECT_NE(server.log().find("model 'm' version " + std::to_string(v) + " freed"), std::string::npos)
        << server.log();
  }
  // A file removed from the repository is unloaded.
  fs::remove(dir.file("repo/m.safetensors"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (state_of(model_index(client), "m", "state") != "UNAVAILABLE" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(state_of(model_index(client), "m", "state"), "UNAVAILABLE");
  const auto gone = testing::post_infer(client, "/v2/models/m/infer", body);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404) << gone->body;
  EXPECT_NE(gone->body.find("was removed"), std::string::npos) << gone->body;
}

TEST(ServeRepository, ExplicitLoadAndUnloadWithVersionsAndAFileThatDoesNotLoad) {
  TempDir dir;
  fs::create_directories(dir.file("repo"));
  deploy(kTimm, dir.file("repo/m.safetensors"));
  ServeProcess server(dir, {"--model-dir", dir.file("repo"), "--model-control", "explicit"});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto post = [&](const std::string& path) { return client.Post(path, "", "application/json"); };
  const json index = model_index(client);
  EXPECT_EQ(state_of(index, "timm", "state"), "READY");
  EXPECT_EQ(state_of(index, "m", "version"), "1");
  const std::string jpg = [&] {
    data::Image image{3, 40, 30, std::vector<uint8_t>(3 * 40 * 30, 90)};
    data::write_image(dir.file("a.png"), image);
    const std::vector<uint8_t> b = testing::read_bytes(dir.file("a.png"));
    return std::string(b.begin(), b.end());
  }();
  const testing::OipBody request = testing::image_request({jpg}, false);

  ASSERT_EQ(post("/v2/repository/models/m/unload")->status, 200);
  const auto unloaded = testing::post_infer(client, "/v2/models/m/infer", request);
  EXPECT_EQ(unloaded->status, 404);
  EXPECT_NE(unloaded->body.find("not being served (UNAVAILABLE: unloaded"), std::string::npos) << unloaded->body;
  EXPECT_EQ(post("/v2/repository/models/m/unload")->status, 404);
  EXPECT_EQ(state_of(model_index(client), "m", "state"), "UNAVAILABLE");

  ASSERT_EQ(post("/v2/repository/models/m/load")->status, 200);
  EXPECT_EQ(json::parse(client.Get("/v2/models/m")->body)["versions"], json({"2"}));
  EXPECT_EQ(client.Get("/v2/models/m/versions/2/ready")->status, 200);
  const auto old = client.Get("/v2/models/m/versions/1");
  EXPECT_EQ(old->status, 404);
  EXPECT_NE(old->body.find("serving version 2"), std::string::npos) << old->body;

  // A file that does not load: the serving version stays, the index says why.
  testing::write_bytes(dir.file("repo/m.safetensors"), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  const auto failed = post("/v2/repository/models/m/load");
  EXPECT_EQ(failed->status, 400);
  EXPECT_NE(failed->body.find("m.safetensors"), std::string::npos) << failed->body;
  const json after = model_index(client);
  EXPECT_EQ(state_of(after, "m", "state"), "READY");
  EXPECT_EQ(state_of(after, "m", "version"), "2");
  EXPECT_NE(state_of(after, "m", "reason").find("does not load"), std::string::npos) << after.dump();
  EXPECT_EQ(testing::first_output(testing::post_infer(client, "/v2/models/m/infer", request)).size(), 10u);
  EXPECT_NE(server.log().find("version 2 still serves"), std::string::npos) << server.log();

  // A file added to --model-dir is loaded by its name; a name with no file is 404.
  testing::write_transform_checkpoint(dir.file("repo/n.safetensors"));
  ASSERT_EQ(post("/v2/repository/models/n/load")->status, 200);
  EXPECT_EQ(testing::first_output(testing::post_infer(client, "/v2/models/n/infer", request)).size(), 2u);
  const auto none = post("/v2/repository/models/nosuch/load");
  EXPECT_EQ(none->status, 404);
  EXPECT_NE(none->body.find("no model 'nosuch' in the repository"), std::string::npos) << none->body;
  // {"ready": true} lists only what serves.
  const auto ready = client.Post("/v2/repository/index", R"({"ready": true})", "application/json");
  for (const json& m : json::parse(ready->body)) EXPECT_EQ(m["state"], "READY");
  EXPECT_EQ(client.Post("/v2/repository/index", "[1", "application/json")->status, 400);
  EXPECT_NE(client.Get("/metrics")->body.find("vit_model_loads_total{model=\"m\",result=\"failed\"} 1"),
            std::string::npos);
}

TEST(ServeRepository, WithoutModelControlLoadAndUnloadAreRefused) {
  TempDir dir;
  ServeProcess server(dir, {});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  for (const char* path : {"/v2/repository/models/timm/load", "/v2/repository/models/timm/unload"}) {
    const auto r = client.Post(path, "", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("needs --model-control explicit (this server's is none)"), std::string::npos) << r->body;
  }
  EXPECT_EQ(state_of(model_index(client), "timm", "state"), "READY");
  EXPECT_EQ(client.Get("/v2/models/timm/ready")->status, 200);
}

}  // namespace
}  // namespace vit
