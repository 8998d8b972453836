// The counters `vit serve` exports at GET /metrics, in Prometheus' text format (version 0.0.4):
// vit_requests_total{endpoint, code}, the request latency histogram
// (vit_request_duration_seconds), the batch-size histogram of model calls (vit_batch_size,
// images per call; vit_batch_requests: requests per call), vit_queue_depth and vit_inflight_requests.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vit::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The _bucket / _sum / _count lines of `name`.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& endpoint, int code, double seconds);
  void batch(int64_t images, int64_t requests);
  std::string text(int64_t queue_depth, int64_t inflight) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram latency_, batch_images_, batch_requests_;
};

}  // namespace vit::serve
