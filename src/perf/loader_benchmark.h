// `vit bench --data DIR`: the input pipeline alone. Streams DIR's training split (an image folder
// or shards) through the training loader (its loader threads: decode, random resized crop, flip,
// normalise) with no model, and reports images/s: what the data side can feed a step.
#pragma once

#include <cstdint>
#include <string>

#include "data/loader.h"

namespace vit::perf {

struct LoaderBenchmarkConfig {
  std::string data_dir;
  int64_t channels = 3, size = 224;
  int64_t batch = 64;
  int64_t batches = 20, warmup = 2;  // timed batches after the warm-up ones
  data::AugmentConfig augment = {};  // applied (a training loader)
};

struct LoaderBenchmarkResult {
  int64_t images = 0;  // timed
  double seconds = 0, images_per_s = 0;
  int loader_threads = 0;
  std::string source;
};

LoaderBenchmarkResult time_loader(const LoaderBenchmarkConfig& config);

}  // namespace vit::perf
