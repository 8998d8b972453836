// Optimiser update kernels (see optim.h). AdamW's loop (a square root and a division per
// weight) is compiled once per ISA (isa_target.h) and run on chunks.
#include "kernels/optim.h"

#include <algorithm>
#include <cmath>

#include "kernels/isa_target.h"
#include "kernels/threads.h"

namespace vit::kernels {

constexpr int64_t kParallelThreshold = 1 << 16;

namespace {

struct AdamWConstants {
  float decay, step_size, b1, b2, inv_sqrt_bias2, eps;
};

inline void adamw_body(float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
                       int64_t n, const AdamWConstants& c) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = c.b1 * m[i] + (1.0f - c.b1) * g;
    v[i] = c.b2 * v[i] + (1.0f - c.b2) * g * g;
    param[i] *= c.decay;
    param[i] -= c.step_size * m[i] / (std::sqrt(v[i]) * c.inv_sqrt_bias2 + c.eps);
  }
}

using AdamWChunk = void (*)(float*, const float*, float*, float*, int64_t, const AdamWConstants&);
[[gnu::flatten]] void adamw_plain(float* p, const float* g, float* m, float* v, int64_t n, const AdamWConstants& c) {
  adamw_body(p, g, m, v, n, c);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void adamw_avx2(float* p, const float* g, float* m, float* v, int64_t n,
                                                 const AdamWConstants& c) {
  adamw_body(p, g, m, v, n, c);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void adamw_avx512(float* p, const float* g, float* m, float* v, int64_t n,
                                                     const AdamWConstants& c) {
  adamw_body(p, g, m, v, n, c);
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, double lr, double beta1, double beta2,
                  double eps, double weight_decay, int64_t step) {
  const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const AdamWConstants c{static_cast<float>(1.0 - lr * weight_decay),
                         static_cast<float>(lr / bias1),
                         static_cast<float>(beta1),
                         static_cast<float>(beta2),
                         static_cast<float>(1.0 / std::sqrt(bias2)),
                         static_cast<float>(eps)};
  const AdamWChunk chunk = per_isa<AdamWChunk>(adamw_plain, adamw_avx2, adamw_avx512);
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n > kParallelThreshold, [&](int64_t k) {
    const int64_t i = k * kChunk;
    chunk(param + i, grad + i, m + i, v + i, std::min(kChunk, n - i), c);
  });
}

void sgd_update(float* param, const float* grad, float* buf, int64_t n, double lr, double momentum, double weight_decay,
                bool nesterov, bool first_step) {
  const float mu = static_cast<float>(momentum), wd = static_cast<float>(weight_decay), rate = static_cast<float>(lr);
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) {
    float g = grad[i] + wd * param[i];
    if (mu != 0.0f) {
      buf[i] = first_step ? g : mu * buf[i] + g;
      g = nesterov ? g + mu * buf[i] : buf[i];
    }
    param[i] -= rate * g;
  });
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
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) { ema[i] = d * ema[i] + rest * x[i]; });
}

}  // namespace vit::kernels
