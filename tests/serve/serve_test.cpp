// `vit serve` end to end, on loopback with an ephemeral port: 64 concurrent clients all answered
// with the logits `vit predict --tensor` gives, dynamic batching seen in /metrics, images answered
// with top-k, malformed requests answered 4xx with a JSON error while the server stays healthy,
// a full queue answered 429, and SIGTERM answering everything in flight before exit 0.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "data/image.h"
#include "io/npy.h"
#include "serve/serve_process.h"
#include "support/files.h"
#include "support/run_vit.h"
#include "support/tolerances.h"

namespace vit {
namespace {

using json = nlohmann::json;
using testing::TempDir;

std::string npy_bytes(const TempDir& dir, const Tensor& t, const std::string& name) {
  io::save_npy(dir.file(name), t);
  const std::vector<uint8_t> b = testing::read_bytes(dir.file(name));
  return std::string(b.begin(), b.end());
}

Tensor images(int64_t n, uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn({n, 3, 32, 32}, gen);
}

std::string metric_line(const std::string& metrics, const std::string& prefix) {
  const size_t at = metrics.find("\n" + prefix);
  if (at == std::string::npos) return "";
  return metrics.substr(at + 1, metrics.find('\n', at + 1) - at - 1);
}

TEST(Serve, SixtyFourConcurrentClientsGetVitPredictsLogitsInDynamicBatches) {
  TempDir dir;
  constexpr int kClients = 64, kRequests = 3;
  // The reference: `vit predict --tensor` over every client's images at once.
  const Tensor all = images(kClients * kRequests, 7);
  io::save_npy(dir.file("all.npy"), all);
  const testing::CommandResult r = testing::vit("predict --checkpoint " + kTimm + " --heads 4 --tensor " +
                                                dir.file("all.npy") + " --out " + dir.file("logits.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Tensor expected = io::load_npy(dir.file("logits.npy"));
  std::vector<std::string> bodies;
  for (int i = 0; i < kClients * kRequests; ++i) {
    bodies.push_back(npy_bytes(dir, all.slice(0, i, i + 1).contiguous(), "one.npy"));
  }

  ServeProcess server(dir, {"--max-batch", "16", "--max-delay-us", "5000", "--max-queue", "256"});
  ASSERT_GT(server.port(), 0);
  std::vector<std::vector<float>> got(kClients * kRequests);
  std::vector<int> status(kClients * kRequests, 0);
  std::vector<std::string> failures(kClients * kRequests);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server.port());
      client.set_read_timeout(60, 0);
      for (int k = 0; k < kRequests; ++k) {
        const int i = c * kRequests + k;
        const auto res = client.Post("/v1/predict", bodies[i], "application/x-npy");
        if (!res) {
          failures[i] = httplib::to_string(res.error());
          continue;
        }
        status[i] = res->status;
        if (res->status == 200) got[i] = json::parse(res->body).at("logits").at(0).get<std::vector<float>>();
      }
    });
  }
  for (auto& t : clients) t.join();
  double worst = 0.0;
  for (int i = 0; i < kClients * kRequests; ++i) {
    ASSERT_EQ(status[i], 200) << "request " << i << " " << failures[i];
    ASSERT_EQ(got[i].size(), 10u);
    for (int k = 0; k < 10; ++k) {
      const double want = expected.data<float>()[i * 10 + k];
      worst = std::max(worst, std::fabs(got[i][k] - want) / std::max(1.0, std::fabs(want)));
    }
  }
  // Batched with other requests or alone, a row's logits are the same computation.
  EXPECT_LE(worst, testing::kInferenceLogitTol) << "largest difference from vit predict";

  httplib::Client client("127.0.0.1", server.port());
  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("vit_requests_total{model=\"timm\",endpoint=\"/v1/predict\",code=\"200\"} 192"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("# TYPE vit_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(metrics->body.find("vit_queue_depth{model=\"timm\"} 0"), std::string::npos);
  // Dynamic batching happened: fewer model calls than requests.
  const std::string calls = metric_line(metrics->body, "vit_batch_size_count{model=\"timm\"} ");
  ASSERT_FALSE(calls.empty()) << metrics->body;
  EXPECT_LT(std::stoll(calls.substr(calls.rfind(' ') + 1)), kClients * kRequests) << metrics->body;
}

TEST(Serve, ImagesGetTopKAndBadRequestsGet4xxWhileTheServerStaysUp) {
  TempDir dir;
  data::Image photo{3, 40, 50, std::vector<uint8_t>(3 * 40 * 50)};
  for (size_t i = 0; i < photo.pixels.size(); ++i) photo.pixels[i] = static_cast<uint8_t>((i * 31) % 253);
  data::write_png(dir.file("photo.png"), photo);
  const std::vector<uint8_t> png = testing::read_bytes(dir.file("photo.png"));
  const testing::CommandResult predicted =
      testing::vit("predict --checkpoint " + kTimm + " --heads 4 --top-k 1 " + dir.file("photo.png"));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.out;

  ServeProcess server(dir, {"--max-body", "200000"});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const auto answer = client.Post("/v1/predict?top_k=3", std::string(png.begin(), png.end()), "image/png");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const json predictions = json::parse(answer->body).at("predictions");
  ASSERT_EQ(predictions.size(), 3u);
  double total = 0.0;
  for (const auto& p : predictions) total += p.at("probability").get<double>();
  EXPECT_LE(total, 1.0 + 1e-9);
  EXPECT_GE(predictions[0].at("probability").get<double>(), predictions[1].at("probability").get<double>());
  // The same top class and probability as `vit predict` ("  12.34%  label").
  const std::string top = predictions[0].at("label");
  EXPECT_NE(predicted.out.find(fmt::format("{:6.2f}%  {}", 100 * predictions[0].at("probability").get<double>(), top)),
            std::string::npos)
      << predicted.out << answer->body;
  // curl --data-binary's default type, application/x-www-form-urlencoded, on an image of more
  // than 8 KiB (the HTTP library refuses such forms when it reads the body itself).
  data::Image big{3, 120, 120, std::vector<uint8_t>(3 * 120 * 120)};
  uint32_t state = 12345;  // noise: PNG cannot compress it below 8 KiB
  for (auto& v : big.pixels) v = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  data::write_png(dir.file("big.png"), big);
  const std::vector<uint8_t> big_png = testing::read_bytes(dir.file("big.png"));
  ASSERT_GT(big_png.size(), 8192u);
  const auto as_form = client.Post("/v1/predict?top_k=2", std::string(big_png.begin(), big_png.end()),
                                   "application/x-www-form-urlencoded");
  ASSERT_TRUE(as_form);
  ASSERT_EQ(as_form->status, 200) << as_form->body;
  EXPECT_EQ(json::parse(as_form->body).at("predictions").size(), 2u);
  const auto embedded = client.Post("/v1/embed", std::string(png.begin(), png.end()), "image/png");
  ASSERT_TRUE(embedded);
  ASSERT_EQ(embedded->status, 200) << embedded->body;
  EXPECT_EQ(json::parse(embedded->body).at("embedding").size(), 48u);

  auto expect_json_error = [&](const httplib::Result& res, int status, const std::string& words) {
    ASSERT_TRUE(res) << words;
    EXPECT_EQ(res->status, status) << res->body;
    const json body = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << res->body;
    EXPECT_NE(body.value("error", "").find(words), std::string::npos) << res->body;
  };
  expect_json_error(client.Post("/v1/predict", "this is not an image", "image/png"), 400, "the request body");
  const std::string good = npy_bytes(dir, images(2, 1), "two.npy");
  expect_json_error(client.Post("/v1/predict", good.substr(0, good.size() - 100), "application/x-npy"), 400,
                    "[npy] the .npy body");
  expect_json_error(
      client.Post("/v1/predict", npy_bytes(dir, Tensor::zeros({2, 3, 16, 16}), "small.npy"), "application/x-npy"), 400,
      "the .npy body: input (2, 3, 16, 16) but the model takes (B, 3, 32, 32)");
  Tensor nan = images(1, 2);
  nan.data<float>()[5] = NAN;
  expect_json_error(client.Post("/v1/predict", npy_bytes(dir, nan, "nan.npy"), "application/x-npy"), 400,
                    "NaN or infinity");
  expect_json_error(client.Post("/v1/predict", std::string(300000, 'x'), "image/png"), 413, "larger than");
  // A chunked body has no Content-Length for the limit to see in advance: still 413.
  const auto chunked = client.Post(
      "/v1/predict",
      [](size_t offset, httplib::DataSink& sink) {
        if (offset >= 300000) {
          sink.done();
          return true;
        }
        const std::string piece(10000, 'x');
        return sink.write(piece.data(), piece.size());
      },
      "image/png");
  expect_json_error(chunked, 413, "larger than");
  expect_json_error(client.Post("/v1/predict", "{\"x\": 1}", "application/json"), 415, "Content-Type");
  expect_json_error(client.Post("/v1/predict", "", "image/png"), 400, "empty");
  expect_json_error(client.Post("/v1/embed?pool=max", good, "application/x-npy"), 400, "pool must be");
  expect_json_error(client.Post("/v1/predict?top_k=-2", good, "application/x-npy"), 400, "top_k");
  expect_json_error(client.Get("/v1/predict"), 405, "takes POST");
  expect_json_error(client.Get("/nothing"), 404, "no such endpoint");
  // Not HTTP at all, on a raw socket.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string garbage = "\x16\x03\x01 HELLO??\r\n\r\n";
  ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  char buffer[256] = {};
  const ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  EXPECT_GT(n, 0);
  EXPECT_EQ(std::string(buffer).rfind("HTTP/1.1 400", 0), 0u) << buffer;

  const auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body).at("status"), "ok");
  EXPECT_EQ(json::parse(health->body).at("precision"), "fp32");  // --precision bf16 says bf16
  const auto again = client.Post("/v1/predict", good, "application/x-npy");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(json::parse(again->body).at("logits").size(), 2u);
}

TEST(Serve, AFullQueueAnswers429) {
  TempDir dir;
  ServeProcess server(dir, {"--max-batch", "1", "--max-queue", "1", "--max-delay-us", "0"});
  ASSERT_GT(server.port(), 0);
  const std::string body = npy_bytes(dir, images(256, 3), "big.npy");
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 24; ++c) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", server.port());
      client.set_read_timeout(60, 0);
      const auto res = client.Post("/v1/predict", body, "application/x-npy");
      if (res && res->status == 200) {
        ++ok;
      } else if (res && res->status == 429 && res->get_header_value("Retry-After") == "1" &&
                 json::parse(res->body).at("error").get<std::string>().find("queue is full") != std::string::npos) {
        ++busy;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GT(busy.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(other.load(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Serve, SigtermAnswersEverythingInFlightThenExits) {
  TempDir dir;
  ServeProcess server(dir, {"--max-batch", "512"});
  ASSERT_GT(server.port(), 0);
  const std::string body = npy_bytes(dir, images(512, 4), "batch.npy");
  constexpr int kClients = 12;
  std::vector<int> status(kClients, 0);
  std::vector<size_t> rows(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server.port());
      client.set_read_timeout(120, 0);
      const auto res = client.Post("/v1/predict", body, "application/x-npy");
      if (!res) return;
      status[c] = res->status;
      if (res->status == 200) rows[c] = json::parse(res->body).at("logits").size();
    });
  }
  // SIGTERM once every request is in the server (the batcher runs them one 512-image batch at a time).
  httplib::Client probe("127.0.0.1", server.port());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    const auto m = probe.Get("/metrics");
    if (m && metric_line(m->body, "vit_inflight_requests ") == fmt::format("vit_inflight_requests {}", kClients)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int code = server.terminate_and_wait();
  for (auto& t : clients) t.join();
  EXPECT_EQ(code, 0) << server.log();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(status[c], 200) << "client " << c << "\n" << server.log();
    EXPECT_EQ(rows[c], 512u);
  }
  EXPECT_NE(server.log().find("SIGTERM: draining"), std::string::npos) << server.log();
  EXPECT_NE(server.log().find("stopped after answering"), std::string::npos) << server.log();
  // Nothing listens any more.
  httplib::Client late("127.0.0.1", server.port());
  EXPECT_FALSE(late.Get("/healthz"));
}

TEST(Serve, BadFlagsAndBusyPortsAreRefusedByName) {
  TempDir dir;
  ServeProcess first(dir, {});
  ASSERT_GT(first.port(), 0);
  testing::expect_error(
      testing::vit("serve --checkpoint " + kTimm + " --heads 4 --port " + std::to_string(first.port())),
      fmt::format("[serve] cannot listen on 127.0.0.1:{}", first.port()));
  const testing::CommandResult r = testing::vit("serve --checkpoint " + kTimm + " --heads 4 --max-batch 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--max-batch"), std::string::npos) << r.out;
  testing::expect_error(testing::vit("serve --checkpoint " + kTimm + " --heads 4 --host ''"),
                        "[serve] --host is empty");
  testing::expect_error(testing::vit("serve --checkpoint " + kTimm + " --heads 4 --host not.an.address --port 0"),
                        "[serve] cannot listen on not.an.address");
  testing::expect_error(testing::vit("serve --checkpoint " + dir.file("none.safetensors")),
                        "[serve] model 'none' (" + dir.file("none.safetensors") + ") does not load: [file] " +
                            dir.file("none.safetensors"));
}

}  // namespace
}  // namespace vit
