// The counters `vit serve` exports at GET /metrics, in Prometheus' text format (version 0.0.4),
// each labelled by model: vit_requests_total{model, endpoint, code}, the request latency histogram
// (vit_request_duration_seconds{model}: arrival to answer), the time requests waited in the model's
// queue before their batch ran (vit_queue_duration_seconds{model}: part of the latency), the
// batch-size histograms of model calls (vit_batch_size: images per call; vit_batch_requests:
// requests per call), vit_queue_depth{model}, vit_inflight_requests (all models), and
// vit_model_loads_total{model, result} (the repository's loads). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace vit::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The _bucket / _sum / _count lines of `name`, with `labels` (e.g. model="a") before le.
  std::string text(const std::string& name, const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  void add_model(const std::string& model);  // its histograms shown (empty) before its first request
  void request(const std::string& model, const std::string& endpoint, int code, double seconds);
  // A model call: its images and each request's time in the queue.
  void batch(const std::string& model, int64_t images, const std::vector<double>& queue_seconds);
  void load(const std::string& model, bool ok);
  // queue_depth: the models served now, each with its queue's depth.
  std::string text(const std::vector<std::pair<std::string, int64_t>>& queue_depth, int64_t inflight) const;

 private:
  struct PerModel {
    PerModel();
    Histogram latency, queue, batch_images, batch_requests;
  };
  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::string, PerModel> per_model_;
  std::map<std::pair<std::string, bool>, uint64_t> loads_;
};

}  // namespace vit::serve
