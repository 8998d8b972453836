// `vit serve`: models behind HTTP (our own HTTP/1.1 layer, serve/http_server.h), each with its own
// dynamic batcher (serve/batcher.h), Prometheus metrics (serve/metrics.h) labelled by model, and
// the Open Inference Protocol (KServe v2, serve/open_inference.h) beside our /v1 endpoints.
//   POST /v1/predict  body: an image (PNG/JPEG/BMP bytes) -> {"predictions": [{index, label,
//                     probability}, ...]} (?top_k=N); or a float32 (B, C, H, W) .npy
//                     (Content-Type: application/x-npy) -> {"logits": [[...], ...]}
//   POST /v1/embed    the same bodies -> {"embedding": [...]} / {"embeddings": [...], "shape": [...]}
//                     (?pool=cls|avg|tokens; default the model's)
//   POST /v1/attention an image -> image/png: vit attention's picture (the image, the last block's
//                     CLS attention, the rollout)
//   GET  /v1/models   the models: name, file, layout, family, image size, channels, classes, embedding width
//   GET  /healthz     {"status": "ok", models...}; 503 {"status": "draining"} while shutting down
//   GET  /metrics     Prometheus text, labelled by model
//   GET  /            a page to try the models (self-contained: no external scripts or fonts)
//   /v2/...           the Open Inference Protocol (serve/open_inference.h)
// With several models, /v1 takes ?model=NAME (needed unless one model is served). Each model has
// its own batcher and queue; model calls take turns on all cores in the order their batches
// became ready (a FIFO turn: a model with a long queue cannot starve another, and no call runs
// on half the cores), so two busy models share the CPU about equally by batch.
// (the route table in server.cpp). ?top_k: any positive whole number, at most the class count
// given ("top_k" in the answer says how many, with a "note" when it was more). A query parameter
// the endpoint does not know is refused (400, naming it and the known ones).
// Every error is JSON {"error": "..."}: 400 a bad body (not an image, a truncated or misshapen
// .npy, NaN, a malformed inference request) or a malformed request, 404 an unknown path, model or
// version, 405 a known path with another method (with Allow), 408 a
// request that did not arrive within --request-timeout, 413 a body over the limit, 431 headers
// too large, 429 the queue is full, 503 a request that waited past the timeout, an image whose
// decoding does not fit in --decode-memory beside the decodes running, memory exhausted, or too
// many connections. A request never stops the server. stop() (SIGTERM, SIGINT) stops accepting
// connections, answers what is in flight (for up to --request-timeout + 1 s), then returns from serve().
#pragma once

#include <memory>
#include <string>
#include <vector>

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
  // POST /v1/attention runs each model's autograd graph, which then keeps float32 weights of its own
  // (infer::own_file_weights: one more copy of the weights in memory); false: refused, no copy.
  bool attention = true;
};

// One served model: its name in URLs (letters, digits, '_', '-', '.') and the file it came from.
struct NamedModel {
  std::string name;
  std::string file;
  infer::Predictor model;
};

class Server {
 public:
  // Throws "[serve] ..." for no models, a bad or repeated name, or bad options.
  Server(std::vector<NamedModel> models, ServerOptions options);
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
