// The input pipeline timed alone (see loader_benchmark.h).
#include "perf/loader_benchmark.h"

#include <chrono>

#include "core/check.h"
#include "data/epoch_plan.h"

namespace vit::perf {

LoaderBenchmarkResult time_loader(const LoaderBenchmarkConfig& config) {
  const data::Dataset d = data::load_dataset(config.data_dir, data::Split::Train, config.channels, config.size,
                                             data::kDefaultMaxPixels, data::Residency::Stream);
  const int64_t wanted = config.warmup + config.batches;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t epoch = 0; static_cast<int64_t>(batches.size()) < wanted; ++epoch) {
    const data::EpochPlan plan = data::plan_epoch(d, config.batch, true, true, 0, epoch);
    VIT_CHECK(!plan.batches.empty(), "bench", "{}: no batches", d.source);
    for (const auto& b : plan.batches) {
      if (static_cast<int64_t>(batches.size()) < wanted) batches.push_back(b);
    }
  }
  data::Normalization norm;
  norm.mean.assign(static_cast<size_t>(config.channels), 0.5);
  norm.std.assign(static_cast<size_t>(config.channels), 0.25);
  data::BatchLoader loader(d, std::move(batches), {.augment = config.augment, .norm = norm, .train = true});
  using Clock = std::chrono::steady_clock;
  Clock::time_point from = Clock::now();
  LoaderBenchmarkResult r;
  for (int64_t i = 0; auto batch = loader.next(); ++i) {
    if (i + 1 == config.warmup) from = Clock::now();
    if (i >= config.warmup) r.images += batch->images.size(0);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - from).count();
  r.images_per_s = static_cast<double>(r.images) / r.seconds;
  r.loader_threads = data::loader_threads();
  r.source = d.source;
  return r;
}

}  // namespace vit::perf
