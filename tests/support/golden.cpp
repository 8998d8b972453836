// Golden-file helpers (see golden.h).
#include "support/golden.h"

#include <cmath>

namespace vit::testing {

io::WeightsFile load_golden(const std::string& file_name) {
  return io::load_safetensors(std::string(VIT_GOLDEN_DIR) + "/" + file_name);
}

Tensor golden(const io::WeightsFile& file, const std::string& key, DType dtype) {
  return file.get(key).to(dtype).contiguous().clone();
}

Tensor golden_targets(const io::WeightsFile& file, const std::string& key) {
  const Tensor t = file.get(key);
  std::vector<int64_t> v;
  for (double x : t.to_vector()) v.push_back(static_cast<int64_t>(x));
  return Tensor::from_data(v, t.shape());
}

static std::string index_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                                     const std::string& name) {
  if (!actual.defined() || !expected.defined()) {
    return ::testing::AssertionFailure() << name << ": undefined tensor (actual defined=" << actual.defined()
                                         << ", expected defined=" << expected.defined() << ")";
  }
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << name << ": shape " << shape_str(actual.shape()) << " != expected "
                                         << shape_str(expected.shape());
  }
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  double scale = 0.0;
  for (double v : e) scale = std::max(scale, std::fabs(v));
  double worst = -1.0, worst_excess = 0.0;
  int64_t worst_at = -1, failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(a[i] - e[i]);
    const double bound = tol.rtol * (std::fabs(e[i]) + scale);
    const bool same_special = (std::isnan(a[i]) && std::isnan(e[i])) || (std::isinf(e[i]) && a[i] == e[i]);
    const bool bad = !same_special && !(diff <= bound);
    if (bad) ++failures;
    const double excess = std::isnan(diff) ? INFINITY : diff - bound;
    if ((bad && (worst_at < 0 || excess > worst_excess)) || (!bad && failures == 0 && diff > worst)) {
      worst = diff;
      worst_excess = excess;
      worst_at = static_cast<int64_t>(i);
    }
  }
  auto head = [](const std::vector<double>& v) {
    std::vector<double> h(v.begin(), v.begin() + std::min<size_t>(v.size(), 6));
    return fmt::format("{}", fmt::join(h, ", "));
  };
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format(
             "{}: {} of {} elements differ (rtol {:g}, scale {:g}); worst at {}: actual {:.9g} expected {:.9g} "
             "(|diff| {:.3g})\n  actual:   {}\n  expected: {}",
             name, failures, a.size(), tol.rtol, scale, index_str(actual.shape(), worst_at), a[worst_at], e[worst_at],
             worst, head(a), head(e));
}

::testing::AssertionResult close_to_largest(const Tensor& actual, const Tensor& expected, double tol,
                                            const std::string& name) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << name << ": shape " << shape_str(actual.shape()) << " vs expected "
                                         << shape_str(expected.shape());
  }
  const auto a = actual.to_vector(), b = expected.to_vector();
  double top = 0.0, worst = 0.0;
  size_t at = 0;
  for (double v : b) top = std::max(top, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= worst)) worst = std::fabs(a[i] - b[i]), at = i;
  }
  if (worst <= tol * top) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": max |diff| " << worst << " at " << at << " (actual " << a[at]
                                       << ", expected " << b[at] << ") vs largest value " << top << " (bound " << tol
                                       << " x largest)";
}

}  // namespace vit::testing
