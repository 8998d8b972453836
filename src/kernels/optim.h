// Optimiser updates over n contiguous parameters, in place (PyTorch's formulas, one loop each).
#pragma once

#include <cstdint>

namespace vit::kernels {

// torch.optim.AdamW: p -= lr * wd * p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, double lr, double beta1, double beta2,
                  double eps, double weight_decay, int64_t step);
// torch.optim.SGD: g += wd * p; buf = momentum * buf + g (buf = g at the first step);
// p -= lr * (nesterov ? g + momentum * buf : buf).
void sgd_update(float* param, const float* grad, float* buf, int64_t n, double lr, double momentum, double weight_decay,
                bool nesterov, bool first_step);
// sum of squares in double.
double sum_squares(const float* x, int64_t n);
// x *= s
void scale_inplace(float* x, int64_t n, float s);
// ema = decay * ema + (1 - decay) * x
void ema_update(float* ema, const float* x, int64_t n, double decay);

}  // namespace vit::kernels
