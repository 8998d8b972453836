// Row reductions (see reduce.h). Two-pass variance for accuracy.
#include "kernels/reduce.h"

#include <cmath>
#include <limits>

#include "kernels/threads.h"

namespace vit::kernels {

constexpr int64_t kParallelRows = 64;

template <typename T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* y) {
  parallel_for(rows, rows * n > (1 << 15) && rows >= 2, [&](int64_t r) {
    double acc = 0.0;
    const T* row = x + r * n;
    for (int64_t i = 0; i < n; ++i) acc += row[i];
    y[r] = static_cast<T>(acc);
  });
}

template <typename T>
void max_rows(const T* x, int64_t rows, int64_t n, T* y, int64_t* index) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    T best = n > 0 ? row[0] : -std::numeric_limits<T>::infinity();
    int64_t best_i = 0;
    for (int64_t i = 1; i < n && !std::isnan(best); ++i) {
      if (row[i] > best || std::isnan(row[i])) {
        best = row[i];
        best_i = i;
      }
    }
    y[r] = best;
    if (index) index[r] = best_i;
  }
}

template <typename T>
void moments_rows(const T* x, int64_t rows, int64_t n, int64_t correction, T* mean, T* var) {
#pragma omp parallel for schedule(static) if (rows >= kParallelRows)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += row[i];
    const double m = n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
    double sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sq += (row[i] - m) * (row[i] - m);
    const double divisor = static_cast<double>(n - correction);
    mean[r] = static_cast<T>(m);
    // PyTorch: divisor <= 0 gives nan (0/0) or inf; we return nan for n - correction <= 0.
    var[r] = static_cast<T>(divisor > 0 ? sq / divisor : std::numeric_limits<double>::quiet_NaN());
  }
}

template <typename T>
void moments_backward(const T* x, const T* mean, const T* dvar, int64_t rows, int64_t n, int64_t correction, T* dx) {
  parallel_for(rows, rows >= kParallelRows, [&](int64_t r) {
    const T scale = static_cast<T>(2.0 / static_cast<double>(n - correction)) * dvar[r];
    for (int64_t i = 0; i < n; ++i) dx[r * n + i] += scale * (x[r * n + i] - mean[r]);
  });
}

template <typename T>
void scatter_rows_add(const T* dy, const int64_t* index, int64_t rows, int64_t n, T* dx) {
  for (int64_t r = 0; r < rows; ++r) dx[r * n + index[r]] += dy[r];
}

#define VIT_INSTANTIATE(T)                                                                        \
  template void sum_rows<T>(const T*, int64_t, int64_t, T*);                                      \
  template void max_rows<T>(const T*, int64_t, int64_t, T*, int64_t*);                            \
  template void moments_rows<T>(const T*, int64_t, int64_t, int64_t, T*, T*);                     \
  template void moments_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, T*); \
  template void scatter_rows_add<T>(const T*, const int64_t*, int64_t, int64_t, T*);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
