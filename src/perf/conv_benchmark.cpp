// Timing a hybrid's convolutions one by one against the measured peak (see conv_benchmark.h).
#include "perf/conv_benchmark.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "kernels/conv/direct_conv.h"
#include "kernels/cpu_features.h"

namespace vit::perf {
namespace {

using kernels::ConvShape;

// The fastest of the calls of f: one warm-up, then until 50 ms have run and at least 5 calls.
template <typename F>
double best_ms(F&& f) {
  f();
  double best = 0, spent = 0;
  for (int call = 0; (call < 5 || spent < 0.050) && call < 10000; ++call) {
    const auto start = std::chrono::steady_clock::now();
    f();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = call == 0 ? seconds : std::min(best, seconds);
    spent += seconds;
  }
  return 1e3 * best;
}

double percent_of(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

const char* kPassNames[3] = {"forward", "input_grad", "weight_grad"};

}  // namespace

std::vector<ConvTiming> backbone_convs(const model::ViTConfig& c, int64_t batch) {
  std::vector<ConvTiming> convs;
  if (!c.hybrid()) return convs;
  auto add = [&](const std::string& name, int64_t in, int64_t out, int64_t side, int64_t kernel, int64_t stride,
                 int64_t padding, bool input_grad) {
    const ConvShape s{batch, in, side, side, kernel, kernel, stride, padding};
    for (ConvTiming& t : convs) {
      const ConvShape& o = t.shape;
      if (o.channels == in && t.out_channels == out && o.height == side && o.kernel_h == kernel && o.stride == stride &&
          o.padding == padding && t.input_grad == input_grad) {
        ++t.calls;
        return s.out_h();
      }
    }
    ConvTiming t;
    t.name = name;
    t.shape = s;
    t.out_channels = out;
    t.calls = 1;
    t.input_grad = input_grad;
    t.gflop = 2.0 * static_cast<double>(batch * s.out_h() * s.out_w() * out * s.row_length()) * 1e-9;
    convs.push_back(t);
    return s.out_h();
  };
  int64_t side =
      add("backbone.stem.conv", c.in_channels, c.conv_channels, c.image_size, 3, c.conv_stem_stride, 1, false);
  int64_t channels = c.conv_channels;
  for (int64_t s = 0; s < c.conv_stages; ++s) {
    const int64_t out = c.conv_channels << s;
    for (int64_t b = 0; b < c.conv_blocks; ++b) {
      const int64_t stride = s > 0 && b == 0 ? 2 : 1;
      const std::string block = fmt::format("backbone.stages.{}.{}", s, b);
      const int64_t out_side = add(block + ".conv1", channels, out, side, 3, stride, 1, true);
      add(block + ".conv2", out, out, out_side, 3, 1, 1, true);
      if (stride != 1 || channels != out) add(block + ".downsample.conv", channels, out, side, 1, stride, 0, true);
      side = out_side;
      channels = out;
    }
  }
  add("patch_embed.proj", channels, c.dim, side, c.embed_patch(), c.embed_patch(), 0, true);
  return convs;
}

ConvReport time_backbone_convs(const model::ViTConfig& c, int64_t batch, uint64_t seed) {
  ConvReport report;
  report.threads = omp_get_max_threads();
  report.kernel = kernels::conv_kernel_name();
  report.convs = backbone_convs(c, batch);
  Generator gen(seed);
  for (ConvTiming& t : report.convs) {
    const ConvShape& s = t.shape;
    const int64_t OC = t.out_channels;
    auto filled = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = 2.0f * gen.uniform_float() - 1.0f;
      return v;
    };
    const std::vector<float> x = filled(s.batch * s.height * s.width * s.channels);
    const std::vector<float> w = filled(OC * s.row_length());
    const std::vector<float> dy = filled(s.batch * s.out_h() * s.out_w() * OC);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
    t.ms[0] = best_ms([&] { kernels::conv_nhwc_forward(s, OC, x.data(), w.data(), y.data()); });
    if (t.input_grad)
      t.ms[1] = best_ms([&] { kernels::conv_nhwc_backward_input(s, OC, dy.data(), w.data(), dx.data(), true); });
    t.ms[2] = best_ms([&] { kernels::conv_nhwc_backward_weight(s, OC, x.data(), dy.data(), dw.data()); });
    const double calls = static_cast<double>(t.calls);
    report.forward_ms += calls * t.ms[0];
    report.training_ms += calls * (t.ms[0] + t.ms[1] + t.ms[2]);
  }
  report.peaks = measure_peaks();
  if (kernels::isa_enabled(kernels::Isa::Avx2)) {
    report.peak = kernels::isa_enabled(kernels::Isa::Avx512) ? Peak::Fma512 : Peak::Fma256;
    report.peak_gflops = report.peaks[report.peak] * report.threads;
    report.has_peak = report.peak_gflops > 0;
  }
  return report;
}

std::string ConvReport::to_text(double median_ms, double model_gflops, bool train) const {
  std::string s;
  if (has_peak) {
    s += fmt::format("  measured peak, one thread: {} {:.1f} {}\n", peak_description(peak), peaks[peak],
                     peak_unit(peak));
  }
  s += fmt::format("  convolutions ({}), each pass timed alone on {} thread{} (share: of the peak x {}):\n", kernel,
                   threads, threads == 1 ? "" : "s", threads);
  s += fmt::format("    {:<36} {:>18} {:>4} {:>5}  {:>18}  {:>18}  {:>18}\n", "conv (first of its shape)",
                   "B H W C -> OC", "k/s", "calls", "forward ms (share)", "input grad", "weight grad");
  auto cell = [&](const ConvTiming& t, int pass) {
    if (pass == 1 && !t.input_grad) return std::string("-");
    if (!has_peak) return fmt::format("{:.3f} ({:.1f} GF/s)", t.ms[pass], t.gflops(pass));
    return fmt::format("{:.3f} ({:4.1f}%)", t.ms[pass], percent_of(t.gflops(pass), peak_gflops));
  };
  for (const ConvTiming& t : convs) {
    const ConvShape& c = t.shape;
    s += fmt::format("    {:<36} {:>18} {:>4} {:>5}  {:>18}  {:>18}  {:>18}\n", t.name,
                     fmt::format("{}x{}x{}x{} -> {}", c.batch, c.height, c.width, c.channels, t.out_channels),
                     fmt::format("{}/{}", c.kernel_h, c.stride), t.calls, cell(t, 0), cell(t, 1), cell(t, 2));
  }
  const double conv_ms = train ? training_ms : forward_ms;
  s += fmt::format("  a {}'s convolutions at these rates: {:.2f} ms, {:.1f}% of the {:.2f} ms median\n",
                   train ? "training step" : "forward", conv_ms, percent_of(conv_ms, median_ms), median_ms);
  if (has_peak) {
    s += fmt::format("  the whole {} at {:.1f} GFLOP/s: {:.1f}% of the peak x {} threads ({:.1f} GFLOP/s)\n",
                     train ? "training step" : "forward", model_gflops, percent_of(model_gflops, peak_gflops), threads,
                     peak_gflops);
  }
  return s;
}

std::string ConvReport::to_json(double median_ms, double model_gflops, bool train) const {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ConvTiming& t : convs) {
    const ConvShape& c = t.shape;
    nlohmann::ordered_json row = {{"name", t.name},       {"batch", c.batch},       {"height", c.height},
                                  {"width", c.width},     {"channels", c.channels}, {"out_channels", t.out_channels},
                                  {"kernel", c.kernel_h}, {"stride", c.stride},     {"padding", c.padding},
                                  {"calls", t.calls},     {"gflop", t.gflop}};
    for (int pass = 0; pass < 3; ++pass) {
      if (pass == 1 && !t.input_grad) continue;
      row[std::string(kPassNames[pass]) + "_ms"] = t.ms[pass];
      if (has_peak) row[std::string(kPassNames[pass]) + "_share"] = t.gflops(pass) / peak_gflops;
    }
    rows.push_back(std::move(row));
  }
  const double conv_ms = train ? training_ms : forward_ms;
  nlohmann::ordered_json j = {{"conv_kernel", kernel},
                              {"convs", std::move(rows)},
                              {"conv_ms", conv_ms},
                              {"conv_share_of_median", percent_of(conv_ms, median_ms) / 100}};
  if (has_peak) {
    j["conv_peak"] = peak_key(peak);
    j["conv_peak_gflops"] = peak_gflops;
    j["model_share_of_peak"] = model_gflops / peak_gflops;
  }
  return j.dump();
}

}  // namespace vit::perf
