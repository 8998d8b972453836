// Model benchmark (see model_benchmark.h).
#include "perf/model_benchmark.h"

#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "checkpoint/int8_format.h"
#include "infer/inference.h"
#include "infer/load_model.h"
#include "model/vision_transformer.h"
#include "optim/optimizer.h"
#include "train/data_parallel.h"

namespace vit::perf {

double peak_rss_mb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

BenchmarkResult run_benchmark(const BenchmarkConfig& config) {
  VIT_CHECK(config.batch >= 1 && config.iters >= 1 && config.warmup >= 0, "bench",
            "batch ({}) and iters ({}) must be >= 1, warmup ({}) >= 0", config.batch, config.iters, config.warmup);
  auto gen = std::make_shared<Generator>(config.seed);
  BenchmarkResult r;
  std::unique_ptr<model::VisionTransformer> owned;
  if (config.checkpoint.empty()) {
    config.model.validate();
    model::check_memory(config.model, config.batch, config.train);
    owned = std::make_unique<model::VisionTransformer>(config.model, gen);
  } else {
    const auto start = std::chrono::steady_clock::now();
    infer::LoadedModel loaded = infer::load_model(config.checkpoint, {});
    r.load_ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    owned = std::move(loaded.model);
    model::check_memory(owned->config(), config.batch, config.train);
  }
  model::VisionTransformer& model = *owned;
  const model::ViTConfig& c = model.config();
  r.precision = checkpoint::is_quantized(model) ? "int8" : "float32";
  VIT_CHECK(!config.train || r.precision == "float32", "bench",
            "{}: an int8 model is for inference; --train needs a float checkpoint", config.checkpoint);
  const infer::Precision precision = infer::parse_precision(config.precision, "bench");
  VIT_CHECK(precision == infer::Precision::F32 || !config.graph, "bench",
            "--precision bf16 is for the inference path and --train (mixed precision), not --graph");
  VIT_CHECK(!config.gemms || (!config.train && !config.graph), "bench",
            "--gemms times the inference path's GEMMs (not --train or --graph)");
  VIT_CHECK(!config.convs || c.hybrid(), "bench",
            "--convs times a hybrid's convolutions: {} has no convolutional backbone (--conv-stages 0)", c.name);
  if (precision == infer::Precision::BF16 && r.precision == "float32") r.precision = "bf16";
  const Tensor images = Tensor::randn({config.batch, c.in_channels, c.image_size, c.image_size}, *gen);
  std::vector<int64_t> labels;
  for (int64_t b = 0; b < config.batch; ++b) labels.push_back(static_cast<int64_t>(gen->integer(c.num_classes)));
  const Tensor targets = Tensor::from_data(labels, {config.batch});
  std::unique_ptr<optim::AdamW> opt;
  train::DataParallel parallel(model, config.train ? omp_get_max_threads() : 1);  // the trainer's step
  data::Batch batch;
  batch.images = images;
  batch.targets = targets;
  if (config.train) {
    model.train();
    if (precision == infer::Precision::BF16) parallel.set_matmul_precision(MatmulPrecision::BF16);  // as vit train
    opt = std::make_unique<optim::AdamW>(model.named_parameters(), 1e-4);
  } else {
    model.eval();
  }
  std::unique_ptr<infer::InferenceSession> session;
  if (!config.train && !config.graph) {
    const auto start = std::chrono::steady_clock::now();
    session =
        std::make_unique<infer::InferenceSession>(model, infer::InferenceSession::WeightPages::Release, precision);
    r.pack_ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  auto step = [&] {
    if (config.train) {
      parallel.forward_backward(batch, 0.0);
      opt->step();
    } else if (session) {
      const Tensor logits = session->forward(images);
      (void)logits;
    } else {
      NoGradGuard no_grad;
      const Variable logits = model(Variable(images));
      (void)logits;
    }
  };
  for (int64_t i = 0; i < config.warmup; ++i) step();
  for (int64_t i = 0; i < config.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    r.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = r.seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double p90 = sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(sorted.size())))];
  r.median_ms = 1e3 * median;
  r.p90_ms = 1e3 * p90;
  r.images_per_s = static_cast<double>(config.batch) / median;
  const double flops = 2.0 * static_cast<double>(model::macs_per_image(c).total()) * static_cast<double>(config.batch) *
                       (config.train ? 3.0 : 1.0);
  r.gflops = flops / median / 1e9;
  r.peak_rss_mb = peak_rss_mb();
  r.peak = precision_peak(r.precision);  // measured after the timed runs, never beside them
  if (r.peak.per_thread > 0) {
    r.peak_gflops = r.peak.per_thread * omp_get_max_threads();
    r.share_of_peak = r.gflops / r.peak_gflops;
  }
  if (config.gemms) r.gemms = time_session_gemms(*session, c, config.batch, config.seed + 1);
  if (config.convs) r.convs = time_backbone_convs(c, config.batch, config.seed + 2);
  return r;
}

double BenchmarkResult::fastest_ms() const {
  return seconds.empty() ? 0.0 : 1e3 * *std::min_element(seconds.begin(), seconds.end());
}

std::string BenchmarkResult::peak_text(int threads) const {
  if (share_of_peak < 0) return "  share of the peak: - (no SIMD FMA at the active ISA level)\n";
  std::string s = fmt::format("  share of the peak: {:.1f}% of {:.1f} {} ({} thread{} x {}'s rate {:.1f} GFLOP/s{})\n",
                              100.0 * share_of_peak, peak_gflops, precision == "int8" ? "GOP/s" : "GFLOP/s", threads,
                              threads == 1 ? "" : "s", peak_description(peak.fma), peak.fma_per_thread,
                              peak.factor == 1 ? "" : fmt::format(" x {} for {}", peak.factor, precision));
  if (peak.ceiling < 1) {
    s += fmt::format("    {}: {:.0f}% is its ceiling on this CPU\n", peak.note, 100.0 * peak.ceiling);
  }
  return s;
}

std::string BenchmarkResult::to_json(const BenchmarkConfig& config, int threads) const {
  nlohmann::ordered_json j = {{"model", config.checkpoint.empty() ? config.model.name : config.checkpoint},
                              {"mode", config.train ? "train" : (config.graph ? "inference-graph" : "inference")},
                              {"precision", precision},
                              {"batch", config.batch},
                              {"threads", threads},
                              {"iters", config.iters},
                              {"median_ms", median_ms},
                              {"p90_ms", p90_ms},
                              {"images_per_s", images_per_s},
                              {"gflops", gflops},
                              {"peak_rss_mb", peak_rss_mb}};
  if (share_of_peak >= 0) {
    j["peak_gflops"] = peak_gflops;
    j["share_of_peak"] = share_of_peak;
    j["peak_basis"] = peak_key(peak.fma);
    j["peak_factor"] = peak.factor;
    j["peak_ceiling"] = peak.ceiling;
  }
  if (load_ms >= 0) j["load_ms"] = load_ms;
  if (pack_ms >= 0) j["pack_ms"] = pack_ms;
  if (gemms) j.update(nlohmann::ordered_json::parse(gemms->to_json(median_ms, fastest_ms())));
  if (convs) j.update(nlohmann::ordered_json::parse(convs->to_json(median_ms, gflops, config.train)));
  return j.dump();
}

}  // namespace vit::perf
