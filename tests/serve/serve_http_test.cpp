// `vit serve` under slow and odd clients, on raw loopback sockets (issue 29, finding 2): slow
// clients hold no worker (/healthz answers within 1 s), a deadline on the whole request, a
// bounded SIGTERM drain, pipelined requests answered in order, a half-closed client answered,
// RFC 9112 framing (Content-Length, Transfer-Encoding, Host, Expect, 431, 405 with Allow),
// connections beyond capacity, bodies beyond what the server holds at once and image decodes
// beyond the decode budget answered 503, the top_k rule and unknown query parameters (finding
// 12), the [::1] banner and --std 0's tag (finding 14).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "data/image.h"
#include "io/npy.h"
#include "serve/serve_process.h"

namespace vit {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using testing::TempDir;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

bool send_all(int fd, const std::string& data) {
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// What arrives until the server closes (or `seconds` pass, or `enough` bytes came).
std::string read_until_close(int fd, double seconds, size_t enough = SIZE_MAX) {
  std::string out;
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  char buffer[65536];
  while (out.size() < enough) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// One raw request on a fresh connection; what came back before the server closed (5 s at most).
std::string round_trip(int port, const std::string& request, double seconds = 5.0) {
  const int fd = connect_to(port);
  send_all(fd, request);
  const std::string reply = read_until_close(fd, seconds);
  close(fd);
  return reply;
}

struct Reply {
  int status = 0;
  std::string head, body;
};
// Responses one after another (each framed by its Content-Length).
std::vector<Reply> replies(std::string data) {
  std::vector<Reply> out;
  for (;;) {
    const size_t end = data.find("\r\n\r\n");
    if (end == std::string::npos || data.rfind("HTTP/1.1 ", 0) != 0) break;
    Reply r;
    r.head = data.substr(0, end);
    r.status = std::stoi(data.substr(9, 3));
    const size_t cl = r.head.find("Content-Length: ");
    const size_t length = cl == std::string::npos ? 0 : std::stoul(r.head.substr(cl + 16));
    r.body = data.substr(end + 4, length);
    data.erase(0, end + 4 + length);
    out.push_back(r);
  }
  return out;
}

std::string npy_body(const TempDir& dir, int64_t n) {
  Generator gen(5);
  io::save_npy(dir.file("x.npy"), Tensor::randn({n, 3, 32, 32}, gen));
  const std::vector<uint8_t> b = testing::read_bytes(dir.file("x.npy"));
  return std::string(b.begin(), b.end());
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path +
         " HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-npy\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra + "\r\n" + body;
}
const std::string kHealth = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

// Clients that each send one byte of a request head every `gap`, for 15 s at most.
class Drippers {
 public:
  Drippers(int port, int count, std::chrono::milliseconds gap) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, port, gap] {
        const int fd = connect_to(port);
        const std::string head = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + std::string(2000, 'a');
        const auto until = Clock::now() + std::chrono::seconds(15);
        for (size_t at = 0; at < head.size() && !stop_ && Clock::now() < until; ++at) {
          if (send(fd, head.data() + at, 1, MSG_NOSIGNAL) != 1) break;
          std::this_thread::sleep_for(gap);
        }
        close(fd);  // the server closed it (a send failed), or the test is over
      });
    }
  }
  ~Drippers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(ServeHttp, SlowClientsHoldNoWorkerAndHealthzAnswersWithinOneSecond) {
  TempDir dir;
  ServeProcess server(dir, {"--http-threads", "4", "--request-timeout", "20"});
  ASSERT_GT(server.port(), 0);
  const std::string body = npy_body(dir, 1);
  Drippers slow(server.port(), 8, std::chrono::milliseconds(200));  // twice the workers
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double worst = 0.0;
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    const std::vector<Reply> r =
        replies(round_trip(server.port(), kHealth + post("/v1/predict", body, "Connection: close\r\n"), 3.0));
    worst = std::max(worst, seconds_since(start));
    ASSERT_EQ(r.size(), 2u) << "probe " << i;
    EXPECT_EQ(r[0].status, 200);
    EXPECT_EQ(r[1].status, 200) << r[1].body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LT(worst, 1.0) << "slowest /healthz + predict under 8 slow clients and 4 workers";
}

TEST(ServeHttp, TheRequestTimeoutBoundsTheWholeRequestNotEachRead) {
  TempDir dir;
  ServeProcess server(dir, {"--request-timeout", "1"});
  ASSERT_GT(server.port(), 0);
  // One byte every 300 ms: each read comes well within the timeout, the request never ends.
  const int fd = connect_to(server.port());
  const auto start = Clock::now();
  std::string reply;
  for (int i = 0; i < 30 && reply.empty(); ++i) {
    if (send(fd, "G", 1, MSG_NOSIGNAL) != 1) break;
    reply = read_until_close(fd, 0.3);
  }
  reply += read_until_close(fd, 1.0);
  close(fd);
  const double took = seconds_since(start);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  EXPECT_LT(took, 2.5) << "a request dripping one byte per 300 ms under --request-timeout 1";
}

TEST(ServeHttp, SigtermWithADrippingClientExitsWithinTheRequestDeadline) {
  TempDir dir;
  ServeProcess server(dir, {"--request-timeout", "2"});
  ASSERT_GT(server.port(), 0);
  Drippers slow(server.port(), 2, std::chrono::milliseconds(300));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = Clock::now();
  const int code = server.terminate_and_wait(8.0);
  const double took = seconds_since(start);
  EXPECT_EQ(code, 0) << "still up 8 s after SIGTERM\n" << server.log();
  EXPECT_LT(took, 2.0 + 2.0) << server.log();
  EXPECT_NE(server.log().find("stopped after answering"), std::string::npos) << server.log();
}

TEST(ServeHttp, PipelinedRequestsAreAnsweredInOrderAndAHalfClosedClientIsAnswered) {
  TempDir dir;
  ServeProcess server(dir, {});
  ASSERT_GT(server.port(), 0);
  const std::string body = npy_body(dir, 2);
  const int fd = connect_to(server.port());
  ASSERT_TRUE(send_all(fd, kHealth + post("/v1/predict", body) + "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n" +
                               post("/v1/embed", body) +
                               "GET /nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  const std::vector<Reply> r = replies(read_until_close(fd, 10.0));
  close(fd);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(json::parse(r[0].body).at("status"), "ok");
  EXPECT_EQ(json::parse(r[1].body).at("logits").size(), 2u);
  EXPECT_NE(r[2].body.find("vit_requests_total"), std::string::npos);
  EXPECT_EQ(json::parse(r[3].body).at("embeddings").size(), 2u);
  EXPECT_EQ(r[4].status, 404);
  // HEAD: the head of GET's answer, no body.
  const std::string head = round_trip(server.port(), "HEAD /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("\r\n\r\n"), head.size() - 4) << head;
  // Probes and caches add cache-busters: GET routes that take no parameters ignore them.
  for (const char* path : {"/healthz?_=1712345678", "/?v=2&v=3", "/v2/health/ready?probe", "/metrics?x=1"}) {
    const std::string got =
        round_trip(server.port(), std::string("GET ") + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << path << "\n" << got.substr(0, 300);
  }
  // The half-closed client: the request, then shutdown(SHUT_WR), then the answer is read.
  const int half = connect_to(server.port());
  ASSERT_TRUE(send_all(half, post("/v1/predict", body)));
  shutdown(half, SHUT_WR);
  const std::vector<Reply> answer = replies(read_until_close(half, 10.0));
  close(half);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].status, 200);
  EXPECT_EQ(json::parse(answer[0].body).at("logits").size(), 2u);
}

TEST(ServeHttp, FramingFollowsRfc9112AndIsRefusedAtOnce) {
  TempDir dir;
  ServeProcess server(dir, {"--max-body", "100000"});
  ASSERT_GT(server.port(), 0);
  const int port = server.port();
  auto expect_status = [&](const std::string& request, int status, const std::string& words) {
    const auto start = Clock::now();
    const std::string reply = round_trip(port, request);
    EXPECT_EQ(reply.rfind("HTTP/1.1 " + std::to_string(status), 0), 0u) << request.substr(0, 80) << "\n" << reply;
    EXPECT_NE(reply.find(words), std::string::npos) << reply;
    EXPECT_LT(seconds_since(start), 1.0) << request.substr(0, 80);
  };
  const std::string head = "POST /v1/predict HTTP/1.1\r\nHost: t\r\n";
  expect_status(head + "Content-Length: -5\r\n\r\n", 400, "Content-Length");
  expect_status(head + "Content-Length: 12345678901234567890\r\n\r\n", 400, "Content-Length");
  expect_status(head + "Content-Length: 10\r\nContent-Length: 12\r\n\r\n0123456789", 400, "conflicting");
  expect_status(head + "Content-Length: 10, 12\r\n\r\n0123456789", 400, "conflicting");
  expect_status(head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "Transfer-Encoding");
  expect_status(head + "Transfer-Encoding: gzip\r\n\r\n", 501, "gzip");
  expect_status("GET /healthz HTTP/1.1\r\n\r\n", 400, "Host");
  expect_status("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
  expect_status("GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n", 400, "obs-fold");
  expect_status("GET /healthz HTTP/1.1\r\nHost : t\r\n\r\n", 400, "header line");
  expect_status("GET /healthz HTTP/2.0\r\nHost: t\r\n\r\n", 505, "HTTP/1.1");
  expect_status("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(64 << 10, 'a') + "\r\n\r\n", 431,
                "too large");
  expect_status("GET /" + std::string(10000, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n", 414, "too long");
  expect_status(head + "Content-Length: 200000\r\n\r\n", 413, "--max-body");
  // Expect: 100-continue with a body over the limit: 413, never "100 Continue".
  const std::string refused = round_trip(port, head + "Content-Length: 200000\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  // Within the limit: 100 Continue, then the answer once the body is sent.
  const std::string body = npy_body(dir, 1);
  const int fd = connect_to(port);
  ASSERT_TRUE(
      send_all(fd, "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-npy\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"));
  const std::string go = read_until_close(fd, 2.0, 25);
  EXPECT_EQ(go, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(send_all(fd, body));
  const std::string answer = read_until_close(fd, 5.0);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  // A chunked body is read, over several chunks.
  const std::string chunked = round_trip(port,
                                         "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-npy\r\n"
                                         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                                             fmt::format("10;ext=1\r\n{}\r\n{:x}\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n",
                                                         body.substr(0, 16), body.size() - 16, body.substr(16)));
  EXPECT_EQ(chunked.rfind("HTTP/1.1 200", 0), 0u) << chunked;
  // Known paths with another method: 405 naming the allowed ones.
  for (const char* method : {"PUT", "DELETE", "PATCH"}) {
    const std::string reply = round_trip(
        port,
        fmt::format("{} /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method));
    EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << method << reply;
    EXPECT_NE(reply.find("Allow: POST\r\n"), std::string::npos) << reply;
  }
  const std::string del = round_trip(port, "DELETE /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(del.rfind("HTTP/1.1 405", 0), 0u) << del;
  EXPECT_NE(del.find("Allow: GET, HEAD\r\n"), std::string::npos) << del;
  // The server is still well.
  EXPECT_EQ(replies(round_trip(port, kHealth.substr(0, kHealth.size() - 2) + "Connection: close\r\n\r\n"))[0].status,
            200);
}

TEST(ServeHttp, ConnectionsBeyondCapacityAreAnswered503) {
  TempDir dir;
  ServeProcess server(dir, {"--max-connections", "3"});
  ASSERT_GT(server.port(), 0);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect_to(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string refused = round_trip(server.port(), kHealth);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("--max-connections"), std::string::npos) << refused;
  close(held.back());
  held.pop_back();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(round_trip(server.port(), "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .rfind("HTTP/1.1 200", 0),
            0u);
  for (const int fd : held) close(fd);
}

// Request bodies held at once are bounded, counted as their bytes arrive: clients that send
// only headers (or a trickle) hold what they sent, never what they declared, so they cannot lock
// every POST out; clients that do send bodies past the bound are refused.
TEST(ServeHttp, RequestBodiesHeldAtOnceAreBoundedByTheBytesThatArrived) {
  TempDir dir;
  ServeProcess server(dir, {"--http-threads", "1", "--max-body", "100000"});  // 100000 bytes of bodies at once
  ASSERT_GT(server.port(), 0);
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(connect_to(server.port()));
    ASSERT_TRUE(send_all(
        idle.back(), "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 90000\r\n\r\n" + std::string(100, 'x')));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string body = npy_body(dir, 1);
  const std::vector<Reply> ok = replies(round_trip(server.port(), post("/v1/predict", body, "Connection: close\r\n")));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].status, 200) << ok[0].body;  // before: 503 while 64 sockets held 5.7 MB they never sent
  for (const int fd : idle) close(fd);
  const int first = connect_to(server.port());
  ASSERT_TRUE(send_all(
      first, "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 90000\r\n\r\n" + std::string(60000, 'x')));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int second = connect_to(server.port());
  send_all(second, "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 90000\r\n\r\n" + std::string(60000, 'x'));
  const std::string refused = read_until_close(second, 5.0);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("request bodies"), std::string::npos) << refused;
  close(second);
  close(first);
}

TEST(ServeHttp, ImageDecodesBeyondTheMemoryBudgetAreAnswered503) {
  TempDir dir;
  // 2048 x 2048 RGB: 12.6 MB of pixels, ~50 MB at the decoder's peak; the budget holds one.
  data::Image big{3, 2048, 2048, std::vector<uint8_t>(size_t{3} * 2048 * 2048, 7)};
  data::write_png(dir.file("big.png"), big);
  const std::vector<uint8_t> png = testing::read_bytes(dir.file("big.png"));
  ASSERT_LT(png.size(), 200000u);
  testing::expect_error(testing::vit("serve --checkpoint " + kTimm + " --heads 4 --port 0 --decode-memory 32"),
                        "[serve] --decode-memory 32 MiB cannot decode one image at the pixel limit");
  ServeProcess server(dir, {"--max-pixels", "4194304", "--decode-memory", "64", "--http-threads", "16"});
  ASSERT_GT(server.port(), 0);
  const std::string request =
      "POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\nConnection: close\r\n"
      "Content-Length: " +
      std::to_string(png.size()) + "\r\n\r\n" + std::string(png.begin(), png.end());
  std::atomic<int> ok{0}, short_of_memory{0}, other{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&] {
      while (!go) std::this_thread::yield();
      const std::vector<Reply> r = replies(round_trip(server.port(), request, 20.0));
      if (r.size() == 1 && r[0].status == 200) {
        ++ok;
      } else if (r.size() == 1 && r[0].status == 503 && r[0].head.find("Retry-After: 1") != std::string::npos &&
                 r[0].body.find("short of image-decoding memory") != std::string::npos) {
        ++short_of_memory;
      } else {
        ++other;
      }
    });
  }
  go = true;
  for (auto& t : clients) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(short_of_memory.load(), 0) << "16 decodes at once, a budget for one";
  EXPECT_EQ(other.load(), 0);
}

TEST(ServeHttp, TopKHasOneRuleAndUnknownQueryParametersAreRefused) {
  TempDir dir;
  data::Image photo{3, 20, 20, std::vector<uint8_t>(3 * 20 * 20, 100)};
  data::write_png(dir.file("p.png"), photo);
  const std::vector<uint8_t> png = testing::read_bytes(dir.file("p.png"));
  ServeProcess server(dir, {});
  ASSERT_GT(server.port(), 0);
  auto ask = [&](const std::string& target) {
    const std::vector<Reply> r = replies(
        round_trip(server.port(), "POST " + target +
                                      " HTTP/1.1\r\nHost: t\r\nContent-Type: image/png\r\nConnection: close\r\n"
                                      "Content-Length: " +
                                      std::to_string(png.size()) + "\r\n\r\n" + std::string(png.begin(), png.end())));
    return r.empty() ? Reply{} : r[0];
  };
  for (const std::string k : {"11", "1000000000", "100000000000000000000000"}) {
    const Reply r = ask("/v1/predict?top_k=" + k);
    ASSERT_EQ(r.status, 200) << k << r.body;
    const json answer = json::parse(r.body);
    EXPECT_EQ(answer.at("predictions").size(), 10u) << k;
    EXPECT_EQ(answer.at("top_k"), 10) << k;
    EXPECT_NE(answer.value("note", "").find("more than the model's 10 classes"), std::string::npos) << r.body;
  }
  const Reply three = ask("/v1/predict?top_k=3");
  ASSERT_EQ(three.status, 200);
  EXPECT_EQ(json::parse(three.body).at("top_k"), 3);
  EXPECT_FALSE(json::parse(three.body).contains("note"));
  for (const std::string k : {"0", "-1", "x", "", "1.5"}) {
    const Reply r = ask("/v1/predict?top_k=" + k);
    EXPECT_EQ(r.status, 400) << k;
    EXPECT_NE(r.body.find("top_k must be a positive whole number"), std::string::npos) << r.body;
  }
  const Reply unknown = ask("/v1/predict?topk=3");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("unknown query parameter 'topk' for POST /v1/predict (known: top_k, model)"),
            std::string::npos)
      << unknown.body;
  const Reply embed = ask("/v1/embed?top_k=3");
  EXPECT_NE(embed.body.find("unknown query parameter 'top_k' for POST /v1/embed (known: pool, model)"),
            std::string::npos)
      << embed.body;
  // A GET route that takes no parameters ignores any (probes' cache-busters; once a 400).
  const std::string health =
      round_trip(server.port(), "GET /healthz?verbose=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
}

TEST(ServeHttp, Ipv6HostIsPrintedInBracketsAndStdZeroIsAPreprocessError) {
  testing::expect_error(
      testing::vit("serve --checkpoint " + kTimm + " --heads 4 --std 0 --port 0"),
      "[serve] model 'timm' (" + kTimm + ") does not load: [preprocess] --std values must be positive, got 0");
  TempDir dir;
  const pid_t pid = testing::spawn({"serve", "--checkpoint", kTimm, "--heads", "4", "--host", "::1", "--port", "0"},
                                   dir.file("v6.log"));
  std::string log;
  for (int i = 0; i < 500 && log.find("vit serve:") == std::string::npos && log.find("error") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = testing::read_text(dir.file("v6.log"));
  }
  kill(pid, SIGTERM);
  testing::wait_for(pid);
  if (log.find("cannot listen on ::1") != std::string::npos) GTEST_SKIP() << "no IPv6 loopback here: " << log;
  EXPECT_NE(log.find("on http://[::1]:"), std::string::npos) << log;
}

}  // namespace
}  // namespace vit
