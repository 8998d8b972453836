// Model input checks and class scores (see model_io.h).
#include "infer/model_io.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace vit::infer {

void check_finite_input(const float* values, int64_t n, const char* op, const std::string& subject) {
  for (int64_t i = 0; i < n; ++i)
    VIT_CHECK(std::isfinite(values[i]), op, "{} contains NaN or infinity (element {} of {})", subject, i, n);
}

template <class T>
std::vector<int64_t> top_k_indices(const T* scores, int64_t n, int64_t k) {
  const int64_t m = std::max<int64_t>(0, std::min(k, n));
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + m, order.end(), [scores](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.resize(static_cast<size_t>(m));
  return order;
}
template std::vector<int64_t> top_k_indices(const float*, int64_t, int64_t);
template std::vector<int64_t> top_k_indices(const double*, int64_t, int64_t);

std::vector<ClassScore> top_k_softmax(const float* logits, int64_t num_classes, int64_t k) {
  VIT_CHECK(num_classes >= 1 && k >= 1, "top_k", "needs at least one class and k >= 1, got {} classes, k {}",
            num_classes, k);
  const int64_t K = num_classes, n = std::min(k, K);
  const double top = *std::max_element(logits, logits + K);
  std::vector<double> p(static_cast<size_t>(K));
  double sum = 0.0;
  for (int64_t i = 0; i < K; ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  std::vector<ClassScore> out;
  for (int64_t i : top_k_indices(p.data(), K, n)) out.push_back({i, p[i] / sum});
  return out;
}

}  // namespace vit::infer
