// `vit serve`: a model behind HTTP (cpp-httplib), with dynamic batching (serve/batcher.h) and
// Prometheus metrics (serve/metrics.h).
//   POST /v1/predict  body: an image (PNG/JPEG/BMP bytes) -> {"predictions": [{index, label,
//                     probability}, ...]} (?top_k=N); or a float32 (B, C, H, W) .npy
//                     (Content-Type: application/x-npy) -> {"logits": [[...], ...]}
//   POST /v1/embed    the same bodies -> {"embedding": [...]} / {"embeddings": [...], "shape": [...]}
//                     (?pool=cls|avg|tokens; default the model's)
//   GET  /healthz     {"status": "ok", model...}; 503 {"status": "draining"} while shutting down
//   GET  /metrics     Prometheus text
// Every error is JSON {"error": "..."}: 400 a bad body (not an image, a truncated or misshapen
// .npy, NaN), 404 / 405 an unknown path or method, 413 a body over the limit, 429 the queue is
// full, 503 a request that waited past the timeout, or the server is draining. A request never
// stops the server. stop() (SIGTERM, SIGINT) stops accepting connections, answers everything in
// flight, then returns from serve().
#pragma once

#include <memory>
#include <string>

#include "infer/predictor.h"
#include "serve/batcher.h"

namespace vit::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() tells which)
  BatcherOptions batching;
  int64_t max_body_bytes = 64 << 20;
  double request_timeout = 30.0;  // seconds: waiting for the model, and reading a request
  int http_threads = 64;          // connections handled at once
  int64_t top_k = 5;
  int64_t max_pixels = 0;  // images: refuse larger ones (0: data::kDefaultMaxPixels)
};

class Server {
 public:
  Server(infer::Predictor model, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Binds the listening socket; returns the port. Throws "[serve] cannot listen on HOST:PORT".
  int bind();
  // Serves until stop(), then drains (everything accepted is answered) and returns.
  void serve();
  // From any thread (a signal watcher): begin the drain.
  void stop();
  int64_t answered() const;  // requests answered so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit::serve
