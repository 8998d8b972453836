// Softmax kernels (see softmax.h): max-subtracted, rows split across threads.
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/isa_target.h"
#include "kernels/threads.h"
#include "kernels/vmath.h"

namespace vit::kernels {

constexpr int64_t kParallelElements = 1 << 14;

// (A simd max reduction: the plain loop was one scalar max at a time, half of softmax's time on
// ViT-Ti. The maximum is the same whatever the order; a NaN row gives NaN outputs either way.)
template <typename T>
static T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// One row: y = exp(x - max) / sum (y may be x: each element is read before it is written).
// Float uses the vectorised exp_fast (vmath.h).
template <typename T>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = row_max(x, n);
  T sum = 0;
  if constexpr (std::is_same_v<T, float>) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      y[i] = exp_fast(x[i] - m);
      sum += y[i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::exp(x[i] - m);
      sum += y[i];
    }
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// The float row once per ISA (isa_target.h): exp_fast vectorised at each width.
using FloatRow = void (*)(const float*, float*, int64_t);
[[gnu::flatten]] void softmax_row_plain(const float* x, float* y, int64_t n) { softmax_row<float>(x, y, n); }
[[gnu::flatten]] VIT_TARGET_AVX2 void softmax_row_avx2(const float* x, float* y, int64_t n) {
  softmax_row<float>(x, y, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void softmax_row_avx512(const float* x, float* y, int64_t n) {
  softmax_row<float>(x, y, n);
}

template <typename T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const FloatRow row = per_isa<FloatRow>(softmax_row_plain, softmax_row_avx2, softmax_row_avx512);
    parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) { row(x + r * n, y + r * n, n); });
  } else {
    parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) { softmax_row<T>(x + r * n, y + r * n, n); });
  }
}

template <typename T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n) {
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    const T* yr = y + r * n;
    const T* dyr = dy + r * n;
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += dyr[i] * yr[i];
    for (int64_t i = 0; i < n; ++i) dx[r * n + i] += yr[i] * (dyr[i] - dot);
  });
}

template <typename T>
void log_softmax_forward(const T* x, T* y, int64_t rows, int64_t n) {
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    const T* xr = x + r * n;
    const T m = row_max(xr, n);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - m);
    // (x - m) - log(sum), not x - (m + log(sum)): adding log(sum) to a large max rounds it away.
    const T log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (xr[i] - m) - log_sum;
  });
}

template <typename T>
void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n) {
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    const T* dyr = dy + r * n;
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += dyr[i];
    for (int64_t i = 0; i < n; ++i) dx[r * n + i] += dyr[i] - std::exp(y[r * n + i]) * sum;
  });
}

template <typename T>
void softmax_forward_ref(const T* x, T* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max<double>(m, x[r * n + i]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[r * n + i]) - m);
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] = static_cast<T>(std::exp(static_cast<double>(x[r * n + i]) - m) / sum);
  }
}

// Row r of x (n) -> its softmax p (n) in double, max-subtracted.
template <typename T>
static void softmax_row_double(const T* x, int64_t n, std::vector<double>& p) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max<double>(m, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += (p[i] = std::exp(static_cast<double>(x[i]) - m));
  for (int64_t i = 0; i < n; ++i) p[i] /= sum;
}

// Softmax Jacobian dy_i/dx_j = p_i (delta_ij - p_j): dx_j += sum_i dy_i p_i (delta_ij - p_j).
template <typename T>
void softmax_backward_ref(const T* x, const T* dy, T* dx, int64_t rows, int64_t n) {
  std::vector<double> p(n);
  for (int64_t r = 0; r < rows; ++r) {
    softmax_row_double(x + r * n, n, p);
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += dy[r * n + i] * p[i] * ((i == j ? 1.0 : 0.0) - p[j]);
      dx[r * n + j] = static_cast<T>(dx[r * n + j] + acc);
    }
  }
}

// log p_i = (x_i - max) - log(sum_j exp(x_j - max)).
template <typename T>
void log_softmax_forward_ref(const T* x, T* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max<double>(m, x[r * n + i]);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[r * n + i]) - m);
    const double log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = static_cast<T>((static_cast<double>(x[r * n + i]) - m) - log_sum);
  }
}

// Log-softmax Jacobian dy_i/dx_j = delta_ij - p_j: dx_j += sum_i dy_i (delta_ij - p_j).
template <typename T>
void log_softmax_backward_ref(const T* x, const T* dy, T* dx, int64_t rows, int64_t n) {
  std::vector<double> p(n);
  for (int64_t r = 0; r < rows; ++r) {
    softmax_row_double(x + r * n, n, p);
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += dy[r * n + i] * ((i == j ? 1.0 : 0.0) - p[j]);
      dx[r * n + j] = static_cast<T>(dx[r * n + j] + acc);
    }
  }
}

#define VIT_INSTANTIATE(T)                                                         \
  template void softmax_forward<T>(const T*, T*, int64_t, int64_t);                \
  template void softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t);     \
  template void log_softmax_forward<T>(const T*, T*, int64_t, int64_t);            \
  template void log_softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t); \
  template void softmax_forward_ref<T>(const T*, T*, int64_t, int64_t);            \
  template void softmax_backward_ref<T>(const T*, const T*, T*, int64_t, int64_t); \
  template void log_softmax_forward_ref<T>(const T*, T*, int64_t, int64_t);        \
  template void log_softmax_backward_ref<T>(const T*, const T*, T*, int64_t, int64_t);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
