// Prometheus text exposition (see metrics.h).
#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace vit::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();  // le: value <= bound
  ++counts_[static_cast<size_t>(at)];
  sum_ += value;
  ++count_;
}

std::string Histogram::text(const std::string& name) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
  return out;
}

Metrics::Metrics()
    : latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      batch_images_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      batch_requests_({1, 2, 4, 8, 16, 32, 64, 128, 256}) {}

void Metrics::request(const std::string& endpoint, int code, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, code}];
  latency_.observe(seconds);
}

void Metrics::batch(int64_t images, int64_t requests) {
  std::lock_guard lock(mutex_);
  batch_images_.observe(static_cast<double>(images));
  batch_requests_.observe(static_cast<double>(requests));
}

std::string Metrics::text(int64_t queue_depth, int64_t inflight) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP vit_requests_total Requests answered, by endpoint and HTTP status code.\n";
  out += "# TYPE vit_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += fmt::format("vit_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", key.first, key.second, n);
  }
  out += "# HELP vit_request_duration_seconds Time from a request's arrival to its answer.\n";
  out += "# TYPE vit_request_duration_seconds histogram\n";
  out += latency_.text("vit_request_duration_seconds");
  out += "# HELP vit_batch_size Images per model call (dynamic batching).\n";
  out += "# TYPE vit_batch_size histogram\n";
  out += batch_images_.text("vit_batch_size");
  out += "# HELP vit_batch_requests Requests per model call (dynamic batching).\n";
  out += "# TYPE vit_batch_requests histogram\n";
  out += batch_requests_.text("vit_batch_requests");
  out += "# HELP vit_queue_depth Requests waiting for the model.\n# TYPE vit_queue_depth gauge\n";
  out += fmt::format("vit_queue_depth {}\n", queue_depth);
  out += "# HELP vit_inflight_requests Requests being handled.\n# TYPE vit_inflight_requests gauge\n";
  out += fmt::format("vit_inflight_requests {}\n", inflight);
  return out;
}

}  // namespace vit::serve
