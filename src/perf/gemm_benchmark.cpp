// Timing a session's GEMMs one by one against the measured peaks (see gemm_benchmark.h).
#include "perf/gemm_benchmark.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "infer/session_gemms.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::perf {
namespace {

using kernels::Isa;
using kernels::isa_enabled;

// The mix the kernel named by infer::linear_kernel runs at the active ISA; false where none
// matches (BLAS, the bf16 emulation, the plain int8 path).
bool matching_peak(const std::string& kernel, Peak& peak) {
  if (kernel == "fp32") {
    if (!isa_enabled(Isa::Avx2)) return false;
    peak = isa_enabled(Isa::Avx512) ? Peak::Fma512 : Peak::Fma256;
    return true;
  }
  if (kernel == "bf16") {
    peak = Peak::Bf16;
    return kernels::bf16_gemm_native();
  }
  if (kernel == "int8") {
    if (!isa_enabled(Isa::Avx2)) return false;
    peak = isa_enabled(Isa::Avx512Vnni) ? Peak::Vnni : Peak::Int8Avx2;
    return true;
  }
  return false;
}

// The time of one call (ms): the fastest of the timed calls, as the peaks are the best of their
// trials (on a shared machine a median caught other processes' time slices: fc2 of ViT-B/16 read
// 44% or 88% of the peak from run to run on a loaded 2-core machine). The calls go round the GEMM's
// instances (each block's weights in turn), so that, as in the forward, a call finds its weights
// where the calls on other weights left the cache, not warm from its own last call. One warm-up
// call, then calls until 50 ms and at least 5 (and one round of the instances) have run, at most
// 10000.
double best_call_ms(const infer::SessionGemm& g, const float* x, float* y) {
  constexpr double kBudgetSeconds = 0.050;
  const size_t min_calls = std::max<size_t>(5, g.instances.size());
  g.weights->forward(x, g.rows, y, g.epilogue);
  double best = 0, spent = 0;
  for (size_t call = 0; (call < min_calls || spent < kBudgetSeconds) && call < 10000; ++call) {
    const infer::LinearWeights& w = *g.instances[call % g.instances.size()];
    const auto start = std::chrono::steady_clock::now();
    w.forward(x, g.rows, y, g.epilogue);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = call == 0 ? seconds : std::min(best, seconds);
    spent += seconds;
  }
  return 1e3 * best;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

}  // namespace

GemmReport time_session_gemms(const infer::InferenceSession& session, const model::ViTConfig& config, int64_t batch,
                              uint64_t seed) {
  GemmReport report;
  report.threads = omp_get_max_threads();
  Generator gen(seed);
  for (const infer::SessionGemm& g : infer::session_gemms(session.weights(), config, batch)) {
    GemmTiming t;
    t.name = g.name;
    t.kernel = infer::linear_kernel(*g.weights);
    t.epilogue = infer::epilogue_name(g.epilogue);
    t.m = g.rows;
    t.k = g.weights->in;
    t.n = g.weights->out;
    t.calls = g.calls;
    std::vector<float> x(static_cast<size_t>(t.m * t.k));  // (M, K) in [-1, 1)
    for (float& v : x) v = 2.0f * gen.uniform_float() - 1.0f;
    std::vector<float> y(static_cast<size_t>(t.m * t.n), 0.0f);  // (M, N)
    t.ms = best_call_ms(g, x.data(), y.data());
    t.gflops = t.ms > 0 ? g.flops() / (t.ms * 1e-3) * 1e-9 : 0.0;
    t.has_peak = matching_peak(t.kernel, t.peak);
    report.total_ms += static_cast<double>(t.calls) * t.ms;
    report.gemms.push_back(std::move(t));
  }
  // Right after the GEMMs: the clock the probes see is the one the kernels saw.
  report.peaks = measure_peaks();
  for (GemmTiming& t : report.gemms) {
    if (!t.has_peak) continue;
    t.peak_gflops = report.peaks[t.peak] * report.threads;
    t.has_peak = t.peak_gflops > 0;
    t.share = t.has_peak ? t.gflops / t.peak_gflops : 0.0;
  }
  return report;
}

std::string GemmReport::to_text(double median_ms, double fastest_ms) const {
  std::string s = "  measured peaks, one thread:";
  bool any = false;
  for (Peak p : kAllPeaks) {
    if (peaks[p] <= 0) continue;
    s += fmt::format("\n    {:<34} {:8.1f} {}", peak_description(p), peaks[p], peak_unit(p));
    any = true;
  }
  s += any ? "\n" : " none (no SIMD mix at the active ISA level)\n";
  s += fmt::format(
      "  GEMMs of a forward, each timed alone on {} thread{} (share: of the peak of its kernel's mix x {}):\n", threads,
      threads == 1 ? "" : "s", threads);
  s += fmt::format("    {:<12} {:<9} {:>6} {:>5} {:>5}  {:<9} {:>5} {:>9} {:>8}  {}\n", "gemm", "kernel", "M", "K", "N",
                   "epilogue", "calls", "ms/call", "GFLOP/s", "share of peak");
  for (const GemmTiming& t : gemms) {
    const std::string share = t.has_peak ? fmt::format("{:5.1f}% {}", 100.0 * t.share, peak_key(t.peak)) : "-";
    s += fmt::format("    {:<12} {:<9} {:>6} {:>5} {:>5}  {:<9} {:>5} {:>9.3f} {:>8.1f}  {}\n", t.name, t.kernel, t.m,
                     t.k, t.n, t.epilogue, t.calls, t.ms, t.gflops, share);
  }
  s += fmt::format(
      "  a forward's GEMMs at these rates: {:.2f} ms, {:.1f}% of the {:.2f} ms median, {:.1f}% of the fastest "
      "forward ({:.2f} ms; the rest: attention, LayerNorm, the other passes)\n",
      total_ms, percent(total_ms, median_ms), median_ms, percent(total_ms, fastest_ms), fastest_ms);
  return s;
}

std::string GemmReport::to_json(double median_ms, double fastest_ms) const {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const GemmTiming& t : gemms) {
    nlohmann::ordered_json row = {{"name", t.name},   {"kernel", t.kernel}, {"m", t.m},
                                  {"k", t.k},         {"n", t.n},           {"epilogue", t.epilogue},
                                  {"calls", t.calls}, {"ms", t.ms},         {"gflops", t.gflops}};
    if (t.has_peak) {
      row["peak"] = peak_key(t.peak);
      row["peak_gflops"] = t.peak_gflops;
      row["share"] = t.share;
    }
    rows.push_back(std::move(row));
  }
  const nlohmann::ordered_json j = {{"peaks", nlohmann::ordered_json::parse(peaks.to_json())},
                                    {"gemms", std::move(rows)},
                                    {"gemm_ms", total_ms},
                                    {"gemm_share", percent(total_ms, median_ms) / 100},
                                    {"gemm_share_of_fastest", percent(total_ms, fastest_ms) / 100}};
  return j.dump();
}

}  // namespace vit::perf
