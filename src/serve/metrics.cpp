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

std::string Histogram::text(const std::string& name, const std::string& labels) const {
  std::string out;
  const std::string sep = labels.empty() ? "" : labels + ",";
  const std::string only = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, sep, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, sep, count_);
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, only, sum_, name, only, count_);
  return out;
}

Metrics::PerModel::PerModel()
    : latency({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      queue({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      batch_images({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      batch_requests({1, 2, 4, 8, 16, 32, 64, 128, 256}) {}

void Metrics::add_model(const std::string& model) {
  std::lock_guard lock(mutex_);
  per_model_[model];
}

void Metrics::request(const std::string& model, const std::string& endpoint, int code, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{model, endpoint, code}];
  per_model_[model].latency.observe(seconds);
}

void Metrics::batch(const std::string& model, int64_t images, const std::vector<double>& queue_seconds) {
  std::lock_guard lock(mutex_);
  PerModel& m = per_model_[model];
  m.batch_images.observe(static_cast<double>(images));
  m.batch_requests.observe(static_cast<double>(queue_seconds.size()));
  for (double s : queue_seconds) m.queue.observe(s);
}

void Metrics::load(const std::string& model, bool ok) {
  std::lock_guard lock(mutex_);
  ++loads_[{model, ok}];
}

std::string Metrics::text(const std::vector<std::pair<std::string, int64_t>>& queue_depth, int64_t inflight) const {
  std::lock_guard lock(mutex_);
  auto label = [](const std::string& model) { return fmt::format("model=\"{}\"", model); };
  std::string out;
  out += "# HELP vit_requests_total Requests answered, by model, endpoint and HTTP status code.\n";
  out += "# TYPE vit_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += fmt::format("vit_requests_total{{{},endpoint=\"{}\",code=\"{}\"}} {}\n", label(std::get<0>(key)),
                       std::get<1>(key), std::get<2>(key), n);
  }
  out += "# HELP vit_request_duration_seconds Time from a request's arrival to its answer.\n";
  out += "# TYPE vit_request_duration_seconds histogram\n";
  for (const auto& [model, m] : per_model_) out += m.latency.text("vit_request_duration_seconds", label(model));
  out += "# HELP vit_queue_duration_seconds Time a request waited in its model's queue before its batch ran.\n";
  out += "# TYPE vit_queue_duration_seconds histogram\n";
  for (const auto& [model, m] : per_model_) out += m.queue.text("vit_queue_duration_seconds", label(model));
  out += "# HELP vit_batch_size Images per model call (dynamic batching).\n";
  out += "# TYPE vit_batch_size histogram\n";
  for (const auto& [model, m] : per_model_) out += m.batch_images.text("vit_batch_size", label(model));
  out += "# HELP vit_batch_requests Requests per model call (dynamic batching).\n";
  out += "# TYPE vit_batch_requests histogram\n";
  for (const auto& [model, m] : per_model_) out += m.batch_requests.text("vit_batch_requests", label(model));
  out += "# HELP vit_queue_depth Requests waiting for the model.\n# TYPE vit_queue_depth gauge\n";
  for (const auto& [model, depth] : queue_depth) out += fmt::format("vit_queue_depth{{{}}} {}\n", label(model), depth);
  out += "# HELP vit_inflight_requests Requests being handled.\n# TYPE vit_inflight_requests gauge\n";
  out += fmt::format("vit_inflight_requests {}\n", inflight);
  if (!loads_.empty()) {
    out += "# HELP vit_model_loads_total Model (re)loads while serving, by result.\n";
    out += "# TYPE vit_model_loads_total counter\n";
    for (const auto& [key, n] : loads_) {
      out += fmt::format("vit_model_loads_total{{{},result=\"{}\"}} {}\n", label(key.first),
                         key.second ? "ok" : "failed", n);
    }
  }
  return out;
}

}  // namespace vit::serve
