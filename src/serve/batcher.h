// Dynamic batching for `vit serve` (what Triton and TorchServe call it): requests, each a batch
// of one or more images, wait in a bounded queue; one worker takes the oldest request, keeps
// collecting requests of the same kind (logits, or embeddings with the same pooling) that arrive
// within max_delay of it, up to max_batch images, runs them through the model as one batch, and
// hands every request its own rows. A full queue refuses at once (HTTP 429); a request whose
// caller stopped waiting (timeout, cancel()) leaves the queue at once and is never run.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "infer/request.h"

namespace vit::serve {

struct BatcherOptions {
  int64_t max_batch = 32;  // images per model call
  // How long the oldest request waits for company. 0 (Triton's default too): no deliberate wait;
  // a batch is what queued while the model was busy, so a lone request runs at once.
  int64_t max_delay_us = 0;
  int64_t max_queue = 64;  // requests waiting (not counting the batch being run)
};

// What a batch is run through: (B, C, H, W) -> (B, ...) for a kind of request (logits, or an
// embedding with its pooling: infer/request.h).
using Kind = infer::Request;
using RunBatch = std::function<Tensor(const Kind& kind, const Tensor& images)>;

class QueueFull : public std::runtime_error {  // HTTP 429
 public:
  using std::runtime_error::runtime_error;
};
class ShuttingDown : public std::runtime_error {  // HTTP 503
 public:
  using std::runtime_error::runtime_error;
};

class Batcher {
 public:
  // on_batch(images, queue_seconds) is called after each model call (metrics): the images run and
  // each request's time from its arrival in the queue to the batch's start.
  using OnBatch = std::function<void(int64_t, const std::vector<double>&)>;
  Batcher(BatcherOptions options, RunBatch run, OnBatch on_batch = {});
  ~Batcher();  // finishes the queued requests, then stops the worker
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  struct Ticket {
    std::future<Tensor> result;                    // the request's rows, or the model's exception
    std::shared_ptr<std::atomic<bool>> cancelled;  // set when the caller gives up waiting
  };
  // Queues images (B, C, H, W); throws QueueFull when max_queue requests already wait, and
  // ShuttingDown once drain() has begun.
  Ticket submit(const Kind& kind, Tensor images);
  // The caller stops waiting (a timeout): the request leaves the queue at once (its place freed,
  // never run); one already in the running batch is only dropped from the answers.
  void cancel(const Ticket& ticket);
  int64_t queue_depth() const;  // requests waiting
  // Stops taking requests (submit throws) and runs what is queued; returns when it is done.
  void drain();

 private:
  struct Job {
    Kind kind;
    Tensor images;
    std::promise<Tensor> result;
    std::shared_ptr<std::atomic<bool>> cancelled;
    std::chrono::steady_clock::time_point arrived;
  };
  void work();
  BatcherOptions options_;
  RunBatch run_;
  OnBatch on_batch_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stopping_ = false, busy_ = false;
  std::thread worker_;
};

}  // namespace vit::serve
