// PyTorch-style printing (torch/_tensor_str.py): one shared element width, integer mode
// ("1.") when every finite value is whole, scientific mode when the finite magnitudes span more
// than 1e3 or leave [1e-4, 1e8), line wrapping at linewidth, "..." summaries past threshold.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "core/tensor.h"

namespace vit {
namespace {

struct Formatter {
  bool int_mode = true;
  bool sci_mode = false;
  bool integer = false;  // int64 tensor
  int precision = 4;
  size_t width = 1;

  std::string format(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return fmt::format("{:.{}e}", v, precision);
    if (int_mode) return integer ? fmt::format("{:.0f}", v) : fmt::format("{:.0f}.", v);
    return fmt::format("{:.{}f}", v, precision);
  }
  std::string padded(double v) const {
    std::string s = format(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

Formatter make_formatter(const std::vector<double>& shown, int precision) {
  Formatter f;
  f.precision = precision;
  std::vector<double> finite;
  for (double v : shown) {
    if (std::isfinite(v)) finite.push_back(v);
  }
  if (!finite.empty()) {
    double max_abs = 0.0, min_abs = INFINITY;
    for (double v : finite) {
      if (v != std::trunc(v)) f.int_mode = false;
      if (v != 0.0) {
        max_abs = std::max(max_abs, std::fabs(v));
        min_abs = std::min(min_abs, std::fabs(v));
      }
    }
    if (max_abs == 0) {
      f.sci_mode = false;
    } else if (f.int_mode) {
      f.sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8;
    } else {
      f.sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
    }
  }
  for (double v : shown) f.width = std::max(f.width, f.format(v).size());
  return f;
}

// Indices of dim `d` that are shown: all, or edgeitems at each end when summarising.
std::vector<int64_t> shown_indices(int64_t n, bool summarize, int64_t edgeitems) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * edgeitems) {
    for (int64_t i = 0; i < edgeitems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = n - edgeitems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, bool summarize, int64_t edgeitems, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  for (int64_t i : shown_indices(t.size(0), summarize, edgeitems)) {
    if (i >= 0) collect(t.select(0, i), summarize, edgeitems, out);
  }
}

std::string format_rec(const Tensor& t, const Formatter& f, const PrintOptions& o, bool summarize, size_t indent) {
  if (t.dim() == 0) return f.format(t.item());
  const auto idx = shown_indices(t.size(0), summarize, o.edgeitems);
  std::string s = "[";
  if (t.dim() == 1) {
    const int64_t per_line =
        std::max<int64_t>(1, (o.linewidth - static_cast<int64_t>(indent)) / static_cast<int64_t>(f.width + 2));
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        s += ",";
        s += (static_cast<int64_t>(k) % per_line == 0) ? "\n" + std::string(indent + 1, ' ') : " ";
      }
      s += idx[k] < 0 ? " ..." : f.padded(t.at({idx[k]}));
    }
    return s + "]";
  }
  const std::string separator =
      "," + std::string(static_cast<size_t>(t.dim() - 1), '\n') + std::string(indent + 1, ' ');
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) s += separator;
    s += idx[k] < 0 ? "..." : format_rec(t.select(0, idx[k]), f, o, summarize, indent + 1);
  }
  return s + "]";
}

}  // namespace

std::string format_tensor(const Tensor& t, const PrintOptions& options, const std::string& prefix,
                          const std::string& suffix) {
  if (!t.defined()) return "tensor(undefined)";
  const bool summarize = t.numel() > options.threshold;
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
  } else {
    std::vector<double> shown;
    collect(t, summarize, options.edgeitems, shown);
    Formatter f = make_formatter(shown, options.precision);
    if (t.dtype() == DType::I64 || t.dtype() == DType::I8) {  // integers print without the trailing "."
      f.int_mode = true;
      f.integer = true;
      f.sci_mode = false;
      f.width = 1;
      for (double v : shown) f.width = std::max(f.width, f.format(v).size());
    }
    body = format_rec(t, f, options, summarize, prefix.size());
  }
  std::string extra;
  if (t.numel() == 0 && t.dim() != 1) extra += ", size=" + shape_str(t.shape());
  if (t.dtype() == DType::F64) extra += fmt::format(", dtype={}", dtype_name(t.dtype()));
  return prefix + body + extra + suffix + ")";
}

std::string Tensor::to_string() const { return format_tensor(*this); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace vit
