// `vit serve`: models behind HTTP. The wiring only: the served models (serve/models/registry.h),
// what the endpoints share (serve/context.h: options, metrics, compute turns, decoding budget), one
// route table (serve/router.h) holding vit's endpoints (serve/v1/endpoints.h) and the Open
// Inference Protocol's (serve/oip/endpoints.h), a batcher per model (serve/batcher.h), and the
// transport, an HTTP/1.1 event loop (serve/http/event_loop.h), and with --grpc-port the same
// protocol over gRPC (serve/grpc/service.h), sharing the models, batchers and metrics.
// Each model has its own batcher and queue; model calls take turns on all cores in the order their
// batches became ready (a FIFO turn: a model with a long queue cannot starve another, and no call
// runs on half the cores), so two busy models share the CPU about equally by batch.
// Every error is JSON {"error": "..."}: 400 a bad body (not an image, a truncated or misshapen
// .npy, NaN, a malformed inference request) or a malformed request, 404 an unknown path, model or
// version, 405 a known path with another method (with Allow), 408 a request that did not arrive
// within --request-timeout, 413 a body over the limit, 431 headers too large, 429 the queue is
// full, 503 a request that waited past the timeout, an image whose decoding does not fit in
// --decode-memory beside the decodes running, memory exhausted, or too many connections. A
// request never stops the server. stop() (SIGTERM, SIGINT) stops accepting connections, answers
// what is in flight (for up to --request-timeout + 1 s), then returns from serve().
#pragma once

#include <memory>
#include <vector>

#include "serve/context.h"
#include "serve/models/registry.h"

namespace vit::serve {

class Server {
 public:
  // Throws "[serve] ..." for no models, a bad or repeated name, or bad options. `specs` (the models
  // named at the start) and `load` (how a file is read) let the model repository load and reload
  // (options.repository); without `load` the models given serve until the end.
  Server(std::vector<NamedModel> models, ServerOptions options, std::vector<ModelSpec> specs = {}, LoadModel load = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Binds the listening socket; returns the port. Throws "[serve] cannot listen on HOST:PORT".
  // Then the gRPC service's (options.grpc_port >= 0): throws "[serve] cannot listen for gRPC ...".
  int bind();
  int grpc_port() const;  // the gRPC service's port after bind(); -1 when it has none
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
