// What every endpoint of `vit serve` shares: the options, the served models, the metrics, the
// compute turns (model calls take turns on all cores, first ready first served: serve/fair_turn.h),
// the image-decoding budget, and the drain state. The protocols' handlers (serve/v1/endpoints.h,
// serve/oip/endpoints.h) run the models through it: images decoded within the budget, batches
// through each model's batcher within the request timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "data/image.h"
#include "infer/request.h"
#include "serve/decode_budget.h"
#include "serve/fair_turn.h"
#include "serve/metrics.h"
#include "serve/models/registry.h"
#include "serve/models/repository.h"

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
  RepositoryOptions repository;  // --model-control, --model-dir, --repository-poll-secs
  int grpc_port = -1;            // the gRPC service's port (-1: none; 0: any free port)

  // Throws "[serve] --request-timeout must be positive ..." and the like.
  void validate() const;
};

struct ServeContext {
  // Throws for bad options, no models (unless the repository may load some later), a bad name.
  ServeContext(std::vector<NamedModel> models, ServerOptions options);

  ModelRegistry models;
  Repository* repository = nullptr;  // loading and unloading (the server's)
  ServerOptions options;
  Metrics metrics;
  FairTurn compute;
  DecodeBudget decode_budget;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> inflight{0}, answered{0};  // model requests
  // After stop(): nobody waits for the model beyond this (the HTTP drain's end).
  std::atomic<int64_t> give_up_ns{std::numeric_limits<int64_t>::max()};

  // An image decoded within the decode budget (HttpError 503 when it does not fit beside the
  // decodes running).
  data::Image decode(const ServedModel& m, const uint8_t* bytes, size_t size, const char* name = "the request body");
  // A batch through the model's batcher, within the request timeout and the drain's end (429 when
  // its queue is full, 503 when shutting down or timed out: the request leaves the queue at once).
  Tensor run(ServedModel& m, const infer::Request& kind, Tensor images);
  int64_t max_pixels() const;
};

}  // namespace vit::serve
