// report.html writer (see report.h).
#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/image.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"

namespace vit::train {

std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[n & 63] : '=';
  }
  return out;
}

double metric(const nlohmann::json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key].get<double>() : NAN;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> column(const std::vector<nlohmann::json>& rows, const char* key) {
  std::vector<double> v;
  for (const auto& r : rows) v.push_back(metric(r, key));
  return v;
}

struct Series {
  std::string label, colour;
  std::vector<double> xs, values;
};

struct Axes {
  std::string x_label;
  enum class Y { Plain, Percent, ErrorLog } y = Y::Plain;
};

// A line chart as inline SVG. ErrorLog plots accuracies as error rates (1 - accuracy) on a log
// axis, so the differences of the last epochs (98.2 vs 98.5%) are visible.
std::string chart(const std::string& title, const std::vector<Series>& series, const Axes& axes) {
  constexpr double W = 480, H = 285, L = 60, R = 15, T = 46, B = 38;  // title, then the legend, above the plot
  const bool log_y = axes.y == Axes::Y::ErrorLog;
  auto y_value = [&](double v) { return log_y ? std::log10(std::max(1.0 - v, 1e-4)) : v; };
  double lo = INFINITY, hi = -INFINITY, x_lo = INFINITY, x_hi = -INFINITY;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.values.size() && i < s.xs.size(); ++i) {
      if (!std::isfinite(s.values[i]) || !std::isfinite(s.xs[i])) continue;
      lo = std::min(lo, y_value(s.values[i])), hi = std::max(hi, y_value(s.values[i]));
      x_lo = std::min(x_lo, s.xs[i]), x_hi = std::max(x_hi, s.xs[i]);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1, x_lo = 0, x_hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1e-3;
  if (x_hi - x_lo < 1e-9) x_hi = x_lo + 1;
  if (log_y) {
    lo = std::floor(lo * 4) / 4, hi = std::ceil(hi * 4) / 4;  // quarter decades
  } else {
    const double pad = (hi - lo) * 0.05;
    lo -= pad, hi += pad;
    if (axes.y == Axes::Y::Percent) lo = std::max(lo, 0.0), hi = std::min(hi, 1.0);
    if (lo < 0 && lo + pad >= 0) lo = 0;  // values that are never negative get no negative axis
  }
  auto x_of = [&](double x) { return L + (x - x_lo) / (x_hi - x_lo) * (W - L - R); };
  auto y_of = [&](double v) { return T + (hi - v) / (hi - lo) * (H - T - B); };
  std::string svg =
      fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" aria-label="{}">)", W, H,
                  escape(title));
  svg += fmt::format(R"(<text x="{}" y="18" font-size="14" font-weight="bold">{}</text>)", L, escape(title));
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    const double y = y_of(v);
    std::string label;
    if (log_y) {
      label = fmt::format("{:.3g}%", 100 * std::pow(10.0, v));
    } else if (axes.y == Axes::Y::Percent) {
      label = fmt::format("{:.1f}%", 100 * v);
    } else {
      label = fmt::format("{:.3g}", v);
    }
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)", L, W - R, y, y);
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="11" text-anchor="end">{}</text>)", L - 4, y + 4, label);
  }
  for (int k = 0; k <= 4; ++k) {
    const double x = x_lo + (x_hi - x_lo) * k / 4.0;
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle">{}</text>)", x_of(x), H - 22,
                       std::abs(x) >= 100 ? fmt::format("{:.0f}", x) : fmt::format("{:.3g}", x));
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text>)", (L + W - R) / 2, H - 6,
                     escape(axes.x_label));
  double legend_x = L;
  for (const auto& s : series) {
    std::string points;
    for (size_t i = 0; i < s.values.size() && i < s.xs.size(); ++i) {
      if (std::isfinite(s.values[i]) && std::isfinite(s.xs[i]))
        points += fmt::format("{:.1f},{:.1f} ", x_of(s.xs[i]), y_of(y_value(s.values[i])));
    }
    svg += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)", s.colour, points);
    if (s.values.size() == 1 && !points.empty()) {  // one epoch: a dot instead of an invisible line
      svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"/>)", x_of(s.xs[0]),
                         y_of(y_value(s.values[0])), s.colour);
    }
    svg += fmt::format(R"(<text x="{}" y="36" font-size="12" fill="{}">&#9632; {}</text>)", legend_x, s.colour,
                       escape(s.label));
    legend_x += 120;
  }
  return svg + "</svg>";
}

// Per-class accuracy as horizontal bars.
std::string class_bars(const std::vector<std::string>& names, const std::vector<double>& accuracy) {
  constexpr double W = 480, row = 20, L = 110, R = 55;
  const double H = 10 + row * static_cast<double>(names.size());
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" aria-label="per-class accuracy">)",
      W, H);
  for (size_t k = 0; k < names.size(); ++k) {
    const double a = k < accuracy.size() && std::isfinite(accuracy[k]) ? accuracy[k] : 0.0;
    const double y = 5 + row * static_cast<double>(k);
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="12" text-anchor="end">{}</text>)", L - 6, y + 13,
                       escape(names[k]));
    svg += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="{}" fill="#eee"/>)", L, y + 2, W - L - R,
                       row - 4);
    svg += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"/>)", L, y + 2, a * (W - L - R),
                       row - 4,
                       a >= 0.9    ? "#2ca02c"
                       : a >= 0.75 ? "#ff7f0e"
                                   : "#d62728");
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="12">{:.1f}%</text>)", W - R + 4, y + 13, 100 * a);
  }
  return svg + "</svg>";
}

// A JSON object as rows of "key | value" (nested objects flattened to a.b keys).
void config_rows(const nlohmann::json& j, const std::string& prefix, std::string& html) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      config_rows(value, name, html);
      continue;
    }
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    html += "<tr><th>" + escape(name) + "</th><td>" + escape(text) + "</td></tr>";
  }
}

}  // namespace

void write_report(const std::string& path, const ReportInputs& in) {
  VIT_CHECK(in.config && in.eval && in.eval_data, "report", "{}: no configuration or evaluation to report", path);
  const TrainConfig& config = *in.config;
  const EvalResult& eval = *in.eval;
  const data::Dataset& test_data = *in.eval_data;
  const std::vector<nlohmann::json>& metrics = in.metrics;
  const std::string set = config.val_split > 0 ? "validation" : "test";
  const int64_t K = static_cast<int64_t>(eval.confusion.size());
  auto name_of = [&](int64_t k) { return k < test_data.num_classes() ? test_data.class_names[k] : std::to_string(k); };
  std::string html = R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>vit training report</title><style>
body{font-family:sans-serif;margin:24px;color:#222;max-width:1020px}h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table.cm,table.kv,table.bench{border-collapse:collapse;font-size:12px}
table.cm td,table.cm th,table.kv td,table.kv th,table.bench td,table.bench th{border:1px solid #ccc;padding:3px 6px}
table.cm td{text-align:right}table.kv th,table.bench td:first-child{text-align:left;font-weight:normal}
table.bench td:last-child{text-align:right}tr.ours td{background:#fff3c4;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:12px}.grid{display:flex;flex-wrap:wrap;gap:8px}.cell{text-align:center;font-size:11px}
.cell img{width:64px;height:64px;image-rendering:pixelated;border:1px solid #999;display:block}</style></head><body>)";
  html += "<h1>vit training report</h1>";
  std::vector<double> epochs = column(metrics, "epoch"), elapsed = column(metrics, "elapsed");
  if (!metrics.empty()) {
    const double acc = column(metrics, "test_acc").back();
    html += fmt::format(
        "<p>{} after epoch {:.0f}: {} accuracy <b>{:.2f}%</b> (error rate {:.2f}%, top-5 {:.2f}%), {} loss {:.4f}; "
        "{:.1f} s of training{}, {:.0f} images/s.</p>",
        escape(config.model.name), epochs.back(), set, 100 * acc, 100 * (1 - acc),
        100 * column(metrics, "test_top5").back(), set, column(metrics, "test_loss").back(), elapsed.back(),
        config.time_budget > 0 ? fmt::format(" of a {:.0f} s budget", config.time_budget) : std::string(),
        column(metrics, "images_per_s").back());
    if (in.benchmark && set == "test") {
      html += fmt::format("<h2>{}: where this run sits</h2><p>{} ({}). This run: {}.</p><table class=\"bench\">",
                          escape(in.benchmark->dataset), "Test accuracy of published methods",
                          escape(in.benchmark->source), escape(placement_text(*in.benchmark, acc)));
      html += "<tr><th>method</th><th>test accuracy</th></tr>";
      const std::string ours = fmt::format("vit: this run ({}, {:.0f} s of training on {} thread(s))",
                                           config.model.name, elapsed.back(), metrics.back().value("threads", 0));
      for (const PlacedRow& r : place(*in.benchmark, ours, acc)) {
        html += fmt::format("<tr{}><td>{}</td><td>{:.1f}%</td></tr>", r.ours ? " class=\"ours\"" : "",
                            escape(r.row.method), 100 * r.row.accuracy);
      }
      html += "</table>";
    }
  }
  html += "<h2>Curves</h2><div class=\"charts\">";
  const std::string cap = set == "test" ? "Test" : "Validation";
  html += chart(cap + " error rate (log scale) against wall time",
                {{set, "#d62728", elapsed, column(metrics, "test_acc")}}, {"seconds of training", Axes::Y::ErrorLog});
  html += chart("Accuracy against wall time",
                {{"train", "#1f77b4", elapsed, column(metrics, "train_acc")},
                 {set, "#d62728", elapsed, column(metrics, "test_acc")}},
                {"seconds of training", Axes::Y::Percent});
  html += chart("Loss",
                {{"train", "#1f77b4", epochs, column(metrics, "train_loss")},
                 {set, "#d62728", epochs, column(metrics, "test_loss")}},
                {"epoch", Axes::Y::Plain});
  if (in.total_steps > 0) {
    Series lr{"learning rate", "#2ca02c", {}, {}};
    const int64_t points = std::min<int64_t>(in.total_steps, 300);
    for (int64_t i = 0; i < points; ++i) {
      const int64_t step = points > 1 ? i * (in.total_steps - 1) / (points - 1) : 0;
      lr.xs.push_back(static_cast<double>(step + 1) / static_cast<double>(std::max<int64_t>(in.steps_per_epoch, 1)));
      lr.values.push_back(
          optim::replanned_cosine_lr(step, in.warmup_steps, config.schedule, in.total_steps, config.lr, config.min_lr));
    }
    html += chart("Learning-rate schedule", {lr}, {"epoch", Axes::Y::Plain});
  }
  html += "</div>";
  std::vector<std::string> names;
  for (int64_t k = 0; k < K; ++k) names.push_back(name_of(k));
  html += fmt::format("<h2>Per-class {} accuracy</h2>", set);
  html += class_bars(names, eval.per_class_accuracy);

  html += fmt::format(
      "<h2>Confusion matrix ({} {} images; rows: true class, columns: predicted)</h2><table "
      "class=\"cm\"><tr><th></th>",
      eval.count, set);
  for (int64_t k = 0; k < K; ++k) html += "<th>" + escape(name_of(k)) + "</th>";
  html += "<th>accuracy</th></tr>";
  int64_t max_off = 1;
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) {
      if (i != j) max_off = std::max(max_off, eval.confusion[i][j]);
    }
  }
  for (int64_t i = 0; i < K; ++i) {
    html += "<tr><th>" + escape(name_of(i)) + "</th>";
    for (int64_t j = 0; j < K; ++j) {
      const int64_t v = eval.confusion[i][j];
      const std::string colour =
          i == j ? "#e3f2e3"
                 : fmt::format("rgba(214,39,40,{:.2f})",
                               v ? 0.15 + 0.75 * static_cast<double>(v) / static_cast<double>(max_off) : 0.0);
      html += fmt::format("<td style=\"background:{}\">{}</td>", colour, v);
    }
    html += fmt::format("<td>{:.1f}%</td></tr>",
                        100 * (std::isfinite(eval.per_class_accuracy[i]) ? eval.per_class_accuracy[i] : 0.0));
  }
  html += "</table>";

  std::vector<int64_t> wrong;
  for (int64_t i = 0; i < static_cast<int64_t>(eval.predictions.size()); ++i) {
    if (eval.predictions[i] >= 0 && eval.predictions[i] != test_data.labels[i]) wrong.push_back(i);
  }
  std::stable_sort(wrong.begin(), wrong.end(),
                   [&](int64_t a, int64_t b) { return eval.confidence[a] > eval.confidence[b]; });
  constexpr size_t kShown = 48;
  html += fmt::format("<h2>Misclassified {} images ({} of {}; the {} most confident mistakes)</h2><div class=\"grid\">",
                      set, wrong.size(), eval.count, std::min(wrong.size(), kShown));
  for (size_t n = 0; n < std::min(wrong.size(), kShown); ++n) {
    const int64_t i = wrong[n];
    const int64_t channels = test_data.channels;
    data::Image image{channels, test_data.height, test_data.width,
                      std::vector<uint8_t>(static_cast<size_t>(test_data.image_bytes()))};
    test_data.read(i, image.pixels.data());
    if (channels != 1 && channels != 3) image = data::convert_channels(image, 1);
    html += fmt::format(
        R"(<div class="cell"><img alt="test image {}" src="data:image/png;base64,{}">true {}<br>pred {} ({:.0f}%)</div>)",
        i, base64(data::encode_png(image)), escape(name_of(test_data.labels[i])), escape(name_of(eval.predictions[i])),
        100 * eval.confidence[i]);
  }
  html += "</div>";
  html += "<h2>Configuration</h2><table class=\"kv\">";
  try {
    config_rows(nlohmann::json::parse(config.model.to_json()), "model", html);
    config_rows(nlohmann::json::parse(config.to_json()), "", html);
  } catch (const nlohmann::json::exception& e) {
    fail("report", "{}: the configuration is not valid JSON ({})", path, e.what());
  }
  html += "</table>";
  html += "</body></html>\n";
  const std::string tmp = io::temp_path(path);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << html;
    out.close();
    if (!out.good()) {
      std::filesystem::remove(tmp);
      fail("report", "{}: cannot write", tmp);
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace vit::train
