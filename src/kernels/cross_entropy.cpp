// Cross-entropy kernels (see cross_entropy.h): log-sum-exp in double per row.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace vit::kernels {

template <typename T>
double cross_entropy_forward(const T* logits, const int64_t* targets, int64_t rows, int64_t classes, double smoothing,
                             T* probs) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* z = logits + r * classes;
    double m = -INFINITY;
    for (int64_t k = 0; k < classes; ++k) m = std::max<double>(m, z[k]);
    double sum = 0.0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(z[k] - m);
    const double log_sum = std::log(sum);  // of the max-shifted logits
    double mean_log_p = 0.0;
    for (int64_t k = 0; k < classes; ++k) {
      const double log_p = (z[k] - m) - log_sum;
      probs[r * classes + k] = static_cast<T>(std::exp(log_p));
      mean_log_p += log_p;
    }
    mean_log_p /= static_cast<double>(classes);
    const double target_log_p = (z[targets[r]] - m) - log_sum;
    total += -(1.0 - smoothing) * target_log_p - smoothing * mean_log_p;
  }
  return rows > 0 ? total / static_cast<double>(rows) : NAN;
}

template <typename T>
void cross_entropy_backward(const T* probs, const int64_t* targets, int64_t rows, int64_t classes, double smoothing,
                            double dloss, T* dlogits) {
  const double scale = dloss / static_cast<double>(rows);
  const double uniform = smoothing / static_cast<double>(classes);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < classes; ++k) {
      const double q = uniform + (k == targets[r] ? 1.0 - smoothing : 0.0);
      dlogits[r * classes + k] += static_cast<T>(scale * (probs[r * classes + k] - q));
    }
  }
}

// Row z (K) -> log p (K) = z - max - log(sum_k exp(z_k - max)), in double.
template <typename T>
static void log_probs_row(const T* z, int64_t classes, std::vector<double>& log_p) {
  double m = -INFINITY;
  for (int64_t k = 0; k < classes; ++k) m = std::max<double>(m, z[k]);
  double sum = 0.0;
  for (int64_t k = 0; k < classes; ++k) sum += std::exp(z[k] - m);
  for (int64_t k = 0; k < classes; ++k) log_p[k] = (z[k] - m) - std::log(sum);
}

// The smoothed target distribution q_k = eps / K + (1 - eps) [k == y].
static double target_weight(int64_t k, int64_t target, int64_t classes, double smoothing) {
  return smoothing / static_cast<double>(classes) + (k == target ? 1.0 - smoothing : 0.0);
}

template <typename T>
double cross_entropy_forward_ref(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                                 double smoothing, T* probs) {
  std::vector<double> log_p(classes);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    log_probs_row(logits + r * classes, classes, log_p);
    for (int64_t k = 0; k < classes; ++k) {
      probs[r * classes + k] = static_cast<T>(std::exp(log_p[k]));
      total -= target_weight(k, targets[r], classes, smoothing) * log_p[k];  // loss_r = -sum_k q_k log p_k
    }
  }
  return rows > 0 ? total / static_cast<double>(rows) : NAN;
}

template <typename T>
void cross_entropy_backward_ref(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                                double smoothing, double dloss, T* dlogits) {
  std::vector<double> log_p(classes);
  for (int64_t r = 0; r < rows; ++r) {
    log_probs_row(logits + r * classes, classes, log_p);
    for (int64_t k = 0; k < classes; ++k) {
      const double grad =
          dloss / static_cast<double>(rows) * (std::exp(log_p[k]) - target_weight(k, targets[r], classes, smoothing));
      dlogits[r * classes + k] = static_cast<T>(dlogits[r * classes + k] + grad);
    }
  }
}

#define VIT_INSTANTIATE(T)                                                                                 \
  template double cross_entropy_forward<T>(const T*, const int64_t*, int64_t, int64_t, double, T*);        \
  template void cross_entropy_backward<T>(const T*, const int64_t*, int64_t, int64_t, double, double, T*); \
  template double cross_entropy_forward_ref<T>(const T*, const int64_t*, int64_t, int64_t, double, T*);    \
  template void cross_entropy_backward_ref<T>(const T*, const int64_t*, int64_t, int64_t, double, double, T*);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
