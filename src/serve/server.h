// `vit serve`: a model behind HTTP (our own HTTP/1.1 layer, serve/http_server.h), with dynamic batching
// (serve/batcher.h) and Prometheus metrics (serve/metrics.h).
//   POST /v1/predict  body: an image (PNG/JPEG/BMP bytes) -> {"predictions": [{index, label,
//                     probability}, ...]} (?top_k=N); or a float32 (B, C, H, W) .npy
//                     (Content-Type: application/x-npy) -> {"logits": [[...], ...]}
//   POST /v1/embed    the same bodies -> {"embedding": [...]} / {"embeddings": [...], "shape": [...]}
//                     (?pool=cls|avg|tokens; default the model's)
//   GET  /healthz     {"status": "ok", model...}; 503 {"status": "draining"} while shutting down
//   GET  /metrics     Prometheus text
// (the route table in server.cpp). ?top_k: any positive whole number, at most the class count
// given ("top_k" in the answer says how many, with a "note" when it was more). A query parameter
// the endpoint does not know is refused (400, naming it and the known ones).
// Every error is JSON {"error": "..."}: 400 a bad body (not an image, a truncated or misshapen
// .npy, NaN) or a malformed request, 404 / 405 an unknown path or method (405 with Allow), 408 a
// request that did not arrive within --request-timeout, 413 a body over the limit, 431 headers
// too large, 429 the queue is full, 503 a request that waited past the timeout, an image whose
// decoding does not fit in --decode-memory beside the decodes running, memory exhausted, or too
// many connections. A request never stops the server. stop() (SIGTERM, SIGINT) stops accepting
// connections, answers what is in flight (for up to --request-timeout + 1 s), then returns from serve().
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
  double request_timeout = 30.0;  // seconds: a whole request arriving, waiting for the model, an answer written
  int http_threads = 64;          // requests handled at once (workers; slow clients hold none)
  int max_connections = 1024;     // open connections (503 beyond)
  int64_t decode_memory_bytes = int64_t{2} << 30;  // images decoded at once, at their peak (503 beyond)
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
  // Serves until stop(), then drains (what is in flight is answered, within the request timeout) and returns.
  void serve();
  // From any thread (a signal watcher): begin the drain.
  void stop();
  int64_t answered() const;  // requests answered so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit::serve
