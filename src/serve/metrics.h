// The counters `vit serve` exports at GET /metrics, in Prometheus' text format (version 0.0.4),
// each labelled by model: vit_requests_total{model, endpoint, code}, the request latency histogram
// (vit_request_duration_seconds{model}), the batch-size histograms of model calls (vit_batch_size:
// images per call; vit_batch_requests: requests per call), vit_queue_depth{model}, and
// vit_inflight_requests (all models). Thread-safe.
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
  explicit Metrics(std::vector<std::string> models);
  void request(const std::string& model, const std::string& endpoint, int code, double seconds);
  void batch(const std::string& model, int64_t images, int64_t requests);
  // queue_depth: one per model, in the constructor's order.
  std::string text(const std::vector<int64_t>& queue_depth, int64_t inflight) const;

 private:
  struct PerModel {
    PerModel();
    Histogram latency, batch_images, batch_requests;
  };
  std::vector<std::string> models_;
  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::string, PerModel> per_model_;
};

}  // namespace vit::serve
