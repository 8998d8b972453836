// Optimiser update kernels (see optim.h).
#include "kernels/optim.h"

#include <cmath>

namespace vit::kernels {

constexpr int64_t kParallelThreshold = 1 << 16;

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, double lr, double beta1, double beta2,
                  double eps, double weight_decay, int64_t step) {
  const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step_size = static_cast<float>(lr / bias1);
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  const float e = static_cast<float>(eps);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    param[i] *= decay;
    param[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bias2 + e);
  }
}

void sgd_update(float* param, const float* grad, float* buf, int64_t n, double lr, double momentum, double weight_decay,
                bool nesterov, bool first_step) {
  const float mu = static_cast<float>(momentum), wd = static_cast<float>(weight_decay), rate = static_cast<float>(lr);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] + wd * param[i];
    if (mu != 0.0f) {
      buf[i] = first_step ? g : mu * buf[i] + g;
      g = nesterov ? g + mu * buf[i] : buf[i];
    }
    param[i] -= rate * g;
  }
}

double sum_squares(const float* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
  return acc;
}

void scale_inplace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void ema_update(float* ema, const float* x, int64_t n, double decay) {
  const float d = static_cast<float>(decay), rest = static_cast<float>(1.0 - decay);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) ema[i] = d * ema[i] + rest * x[i];
}

}  // namespace vit::kernels
