// report.html writer (see report.h).
#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/image.h"
#include "io/safetensors.h"

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
  std::vector<double> values;
};

// A line chart over epochs 1..n as inline SVG.
std::string chart(const std::string& title, const std::vector<Series>& series, bool percent) {
  constexpr double W = 460, H = 260, L = 55, R = 15, T = 30, B = 35;
  double lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  for (const auto& s : series) {
    for (double v : s.values) {
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    n = std::max(n, s.values.size());
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) hi = lo + 1e-3;
  const double pad = (hi - lo) * 0.05;
  lo -= pad, hi += pad;
  if (percent) lo = std::max(lo, 0.0), hi = std::min(hi, 1.0);  // accuracies live in [0, 100%]
  auto x_of = [&](size_t i) {
    return L + (n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5) * (W - L - R);
  };
  auto y_of = [&](double v) { return T + (hi - v) / (hi - lo) * (H - T - B); };
  std::string svg = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img">)", W, H);
  svg += fmt::format(R"(<text x="{}" y="18" font-size="14" font-weight="bold">{}</text>)", L, escape(title));
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    const double y = y_of(v);
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)", L, W - R, y, y);
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="11" text-anchor="end">{}</text>)", L - 4, y + 4,
                       percent ? fmt::format("{:.1f}%", 100 * v) : fmt::format("{:.3f}", v));
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle">epoch (1..{})</text>)", (L + W - R) / 2,
                     H - 8, n);
  double legend_x = L + 180;
  for (const auto& s : series) {
    std::string points;
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (std::isfinite(s.values[i])) points += fmt::format("{:.1f},{:.1f} ", x_of(i), y_of(s.values[i]));
    }
    svg += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)", s.colour, points);
    svg += fmt::format(R"(<text x="{}" y="18" font-size="12" fill="{}">&#9632; {}</text>)", legend_x, s.colour,
                       escape(s.label));
    legend_x += 110;
  }
  return svg + "</svg>";
}

}  // namespace

void write_report(const std::string& path, const model::ViTConfig& model, const std::string& train_config_json,
                  const std::vector<nlohmann::json>& metrics, const EvalResult& eval, const data::Dataset& test_data) {
  const int64_t K = static_cast<int64_t>(eval.confusion.size());
  auto name_of = [&](int64_t k) { return k < test_data.num_classes() ? test_data.class_names[k] : std::to_string(k); };
  std::string html = R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>vit training report</title><style>
body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table.cm{border-collapse:collapse;font-size:12px}table.cm td,table.cm th{border:1px solid #ccc;padding:3px 6px;text-align:right}
.grid{display:flex;flex-wrap:wrap;gap:8px}.cell{text-align:center;font-size:11px}
.cell img{width:64px;height:64px;image-rendering:pixelated;border:1px solid #999;display:block}
pre{background:#f6f6f6;padding:8px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}</style></head><body>)";
  html += "<h1>vit training report</h1>";
  if (!metrics.empty()) {
    const std::vector<double> row = {column(metrics, "epoch").back(),     column(metrics, "test_acc").back(),
                                     column(metrics, "test_top5").back(), column(metrics, "test_loss").back(),
                                     column(metrics, "elapsed").back(),   column(metrics, "images_per_s").back()};
    html += fmt::format(
        "<p>Epoch {:.0f}: test accuracy <b>{:.2f}%</b> (top-5 {:.2f}%), test loss {:.4f}, "
        "{:.1f} s of training so far, {:.0f} images/s.</p>",
        row[0], 100 * row[1], 100 * row[2], row[3], row[4], row[5]);
  }
  html += chart(
      "Loss", {{"train", "#1f77b4", column(metrics, "train_loss")}, {"test", "#d62728", column(metrics, "test_loss")}},
      false);
  html += chart("Accuracy",
                {{"train", "#1f77b4", column(metrics, "train_acc")}, {"test", "#d62728", column(metrics, "test_acc")}},
                true);

  html += fmt::format(
      "<h2>Confusion matrix ({} test images; rows: true class, columns: predicted)</h2><table "
      "class=\"cm\"><tr><th></th>",
      eval.count);
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
  html +=
      fmt::format("<h2>Misclassified test images ({} of {}; the {} most confident mistakes)</h2><div class=\"grid\">",
                  wrong.size(), eval.count, std::min(wrong.size(), kShown));
  for (size_t n = 0; n < std::min(wrong.size(), kShown); ++n) {
    const int64_t i = wrong[n];
    const int64_t channels = test_data.channels;
    data::Image image{channels, test_data.height, test_data.width,
                      std::vector<uint8_t>(test_data.image(i), test_data.image(i) + test_data.image_bytes())};
    if (channels != 1 && channels != 3) image = data::convert_channels(image, 1);
    html += fmt::format(
        R"(<div class="cell"><img alt="test image {}" src="data:image/png;base64,{}">true {}<br>pred {} ({:.0f}%)</div>)",
        i, base64(data::encode_png(image)), escape(name_of(test_data.labels[i])), escape(name_of(eval.predictions[i])),
        100 * eval.confidence[i]);
  }
  html += "</div>";
  html += "<h2>Configuration</h2><pre>model: " + escape(model.to_json()) + "\ntraining: " + escape(train_config_json) +
          "</pre>";
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
