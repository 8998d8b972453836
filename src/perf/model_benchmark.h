// Timing a model: inference (the graph-free infer::InferenceSession, or the autograd graph) or
// a full training step as the trainer runs it (train::DataParallel forward, cross-entropy,
// backward, AdamW), after warm-up, reporting latency percentiles, throughput, achieved GFLOP/s
// (2 x multiply-accumulates of the forward; x3 for a training step) and its share of the machine's
// measured peak for the precision (perf/peak_probe.h: precision_peak), and peak resident memory.
// With gemms, the inference session's GEMMs are then timed one by one against the measured peaks
// (perf/gemm_benchmark.h); with convs, a hybrid's convolutions (perf/conv_benchmark.h).
// Its own room (perf) because it times both paths: it sits above train and infer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/vit_config.h"
#include "perf/conv_benchmark.h"
#include "perf/gemm_benchmark.h"
#include "perf/peak_probe.h"

namespace vit::perf {

struct BenchmarkConfig {
  model::ViTConfig model;
  int64_t batch = 1;
  int64_t iters = 20;
  int64_t warmup = 3;
  bool train = false;
  bool graph = false;              // inference through the autograd graph instead of the inference path
  std::string checkpoint;          // non-empty: load this model (timed) instead of building `model`
  std::string precision = "fp32";  // "bf16": inference's float32 Linears in bfloat16; --train: mixed precision
  bool gemms = false;              // inference session: also time each GEMM alone (gemm_benchmark.h)
  bool convs = false;              // a hybrid: also time each convolution's passes alone (conv_benchmark.h)
  uint64_t seed = 0;
};

struct BenchmarkResult {
  std::vector<double> seconds;  // per measured iteration
  double median_ms = 0, p90_ms = 0, images_per_s = 0, gflops = 0;
  double peak_rss_mb = 0;
  double pack_ms = -1;    // inference: time to set up the session (every weight packed for the GEMM)
  double load_ms = -1;    // with a checkpoint: time to load it (memory-mapped, no copy of float32 weights)
  std::string precision;  // "float32", "bf16" (--precision bf16), or "int8" for a model written by vit quantize
  // The whole run against the machine's limit (perf/peak_probe.h's PrecisionPeak of `precision`
  // x threads); share_of_peak < 0 where no SIMD FMA runs at the ISA level.
  PrecisionPeak peak;
  double peak_gflops = 0, share_of_peak = -1;
  std::string peak_text(int threads) const;  // one line for people: "  share of the peak: ..."
  std::optional<GemmReport> gemms;           // with config.gemms
  std::optional<ConvReport> convs;           // with config.convs
  std::string to_json(const BenchmarkConfig& config, int threads) const;
  double fastest_ms() const;  // the fastest measured iteration
};

BenchmarkResult run_benchmark(const BenchmarkConfig& config);

// Peak resident set size of this process so far, in MiB.
double peak_rss_mb();

}  // namespace vit::perf
