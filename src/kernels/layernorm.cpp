// LayerNorm kernels (see layernorm.h), following llm.c's layernorm_forward/backward pair.
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w and xhat = (x - mean) * rstd.
// Parameter gradients are summed in blocks of rows, the blocks per thread in double, then the
// threads' sums, so rows run in parallel. The float rows are compiled once per ISA (isa_target.h).
#include "kernels/layernorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/isa_target.h"
#include "kernels/threads.h"

namespace vit::kernels {

namespace {

// One row of the forward pass.
template <typename T>
inline void layernorm_row(const T* xr, const T* weight, const T* bias, T* yr, T* mean, T* rstd, int64_t n, double eps) {
  // omp simd: the sums may be reassociated (vectorised); they stay in double.
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += xr[i];
  const double m = sum / static_cast<double>(n);
  double sq = 0.0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) sq += (xr[i] - m) * (xr[i] - m);
  const double s = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  const T tm = static_cast<T>(m), ts = static_cast<T>(s);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T xhat = (xr[i] - tm) * ts;
    yr[i] = xhat * (weight ? weight[i] : T(1)) + (bias ? bias[i] : T(0));
  }
  if (mean) *mean = tm;
  if (rstd) *rstd = ts;
}

// The float row once per ISA (isa_target.h).
using FloatRow = void (*)(const float*, const float*, const float*, float*, float*, float*, int64_t, double);
[[gnu::flatten]] void row_plain(const float* x, const float* w, const float* b, float* y, float* m, float* s, int64_t n,
                                double eps) {
  layernorm_row<float>(x, w, b, y, m, s, n, eps);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void row_avx2(const float* x, const float* w, const float* b, float* y, float* m,
                                               float* s, int64_t n, double eps) {
  layernorm_row<float>(x, w, b, y, m, s, n, eps);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void row_avx512(const float* x, const float* w, const float* b, float* y, float* m,
                                                   float* s, int64_t n, double eps) {
  layernorm_row<float>(x, w, b, y, m, s, n, eps);
}

// Rows [0, rows) of the backward pass: dx (if not null) += rstd * (g - mean(g) - xhat * mean(g * xhat))
// with the two row means summed in double, and dw, db (if not null) += dy * xhat, dy summed in T
// (the caller hands a few dozen rows at a time and sums the blocks in double). omp simd: the row
// sums may be reassociated, so the loops vectorise.
template <typename T>
inline void layernorm_backward_rows(const T* __restrict x, const T* __restrict weight, const T* __restrict mean,
                                    const T* __restrict rstd, const T* __restrict dy, T* __restrict dx,
                                    T* __restrict dw, T* __restrict db, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    const T* dyr = dy + r * n;
    const T m = mean[r], s = rstd[r];
    double g_mean = 0.0, gx_mean = 0.0;
    if (dw) {
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int64_t i = 0; i < n; ++i) {
        const T xhat = (xr[i] - m) * s;
        const T g = dyr[i] * (weight ? weight[i] : T(1));
        g_mean += g;
        gx_mean += g * xhat;
        dw[i] += dyr[i] * xhat;
        db[i] += dyr[i];
      }
    } else {
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int64_t i = 0; i < n; ++i) {
        const T xhat = (xr[i] - m) * s;
        const T g = dyr[i] * (weight ? weight[i] : T(1));
        g_mean += g;
        gx_mean += g * xhat;
      }
    }
    if (!dx) continue;
    T* dxr = dx + r * n;
    const T gm = static_cast<T>(g_mean / static_cast<double>(n)),
            gxm = static_cast<T>(gx_mean / static_cast<double>(n));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T xhat = (xr[i] - m) * s;
      const T g = dyr[i] * (weight ? weight[i] : T(1));
      dxr[i] += s * (g - gm - xhat * gxm);
    }
  }
}

template <typename T>
using BackwardRows = void (*)(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t);
[[gnu::flatten]] void backward_plain(const float* x, const float* w, const float* m, const float* s, const float* dy,
                                     float* dx, float* dw, float* db, int64_t rows, int64_t n) {
  layernorm_backward_rows<float>(x, w, m, s, dy, dx, dw, db, rows, n);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void backward_avx2(const float* x, const float* w, const float* m, const float* s,
                                                    const float* dy, float* dx, float* dw, float* db, int64_t rows,
                                                    int64_t n) {
  layernorm_backward_rows<float>(x, w, m, s, dy, dx, dw, db, rows, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void backward_avx512(const float* x, const float* w, const float* m, const float* s,
                                                        const float* dy, float* dx, float* dw, float* db, int64_t rows,
                                                        int64_t n) {
  layernorm_backward_rows<float>(x, w, m, s, dy, dx, dw, db, rows, n);
}

// Rows per block of the parameter gradients' sums in T (then added into double).
constexpr int64_t kBlockRows = 32;

}  // namespace

template <typename T>
void layernorm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                       double eps) {
  if constexpr (std::is_same_v<T, float>) {
    const FloatRow row = per_isa<FloatRow>(row_plain, row_avx2, row_avx512);
    parallel_for(rows, rows * n > (1 << 14), [&](int64_t r) {
      row(x + r * n, weight, bias, y + r * n, mean ? mean + r : nullptr, rstd ? rstd + r : nullptr, n, eps);
    });
  } else {
    parallel_for(rows, rows * n > (1 << 14), [&](int64_t r) {
      layernorm_row<T>(x + r * n, weight, bias, y + r * n, mean ? mean + r : nullptr, rstd ? rstd + r : nullptr, n,
                       eps);
    });
  }
}

template <typename T>
void layernorm_backward(const T* x, const T* weight, const T* mean, const T* rstd, const T* dy, T* dx, T* dweight,
                        T* dbias, int64_t rows, int64_t n) {
  const int threads = parallel_worth(rows * n > (1 << 14)) ? omp_get_max_threads() : 1;
  const bool need_params = dweight || dbias;
  std::vector<double> partial(need_params ? static_cast<size_t>(threads) * 2 * n : 0, 0.0);
  BackwardRows<T> block = layernorm_backward_rows<T>;
  if constexpr (std::is_same_v<T, float>)
    block = per_isa<BackwardRows<float>>(backward_plain, backward_avx2, backward_avx512);
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  // Block k of rows, its parameter sums into dw_local through `sums` (this block's dw, db in T).
  auto run_block = [&](int64_t k, double* dw_local, std::vector<T>& sums) {
    const int64_t r0 = k * kBlockRows, count = std::min(kBlockRows, rows - r0);
    std::fill(sums.begin(), sums.end(), T(0));
    block(x + r0 * n, weight, mean + r0, rstd + r0, dy + r0 * n, dx ? dx + r0 * n : nullptr,
          need_params ? sums.data() : nullptr, need_params ? sums.data() + n : nullptr, count, n);
    for (int64_t i = 0; need_params && i < 2 * n; ++i) dw_local[i] += sums[i];
  };
  if (threads == 1) {  // no team at all (threads.h)
    std::vector<T> sums(need_params ? 2 * n : 0);
    for (int64_t k = 0; k < blocks; ++k) run_block(k, need_params ? partial.data() : nullptr, sums);
  } else {
#pragma omp parallel num_threads(threads)
    {
      double* dw_local = need_params ? partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * n : nullptr;
      std::vector<T> sums(need_params ? 2 * n : 0);
#pragma omp for schedule(static)
      for (int64_t k = 0; k < blocks; ++k) run_block(k, dw_local, sums);
    }
  }
  for (int t = 0; need_params && t < threads; ++t) {
    const double* dw_local = partial.data() + static_cast<size_t>(t) * 2 * n;
    for (int64_t i = 0; i < n; ++i) {
      if (dweight) dweight[i] += static_cast<T>(dw_local[i]);
      if (dbias) dbias[i] += static_cast<T>(dw_local[n + i]);
    }
  }
}

namespace {

// Mean and (biased) variance of one row of n values, two passes in double: the references' statistics.
template <typename T>
std::pair<double, double> row_moments_ref(const T* row, int64_t n) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < n; ++i) mean += row[i];
  mean /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
  return {mean, var / static_cast<double>(n)};
}

}  // namespace

template <typename T>
void layernorm_forward_ref(const T* x, const T* weight, const T* bias, T* y, int64_t rows, int64_t n, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const auto [mean, var] = row_moments_ref(x + r * n, n);
    for (int64_t i = 0; i < n; ++i) {
      const double xhat = (x[r * n + i] - mean) / std::sqrt(var + eps);
      y[r * n + i] = static_cast<T>(xhat * (weight ? weight[i] : 1.0) + (bias ? bias[i] : 0.0));
    }
  }
}

// With xhat = (x - mean) * rstd and g = dy * w (per row, means over the row's n elements):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum_rows dy * xhat,  db = sum_rows dy.
template <typename T>
void layernorm_backward_ref(const T* x, const T* weight, const T* dy, T* dx, T* dweight, T* dbias, int64_t rows,
                            int64_t n, double eps) {
  std::vector<double> xhat(n), g(n);           // one row (n)
  std::vector<double> dw(n, 0.0), db(n, 0.0);  // (n), summed over rows in double
  for (int64_t r = 0; r < rows; ++r) {
    const auto [mean, var] = row_moments_ref(x + r * n, n);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double g_mean = 0.0, gx_mean = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      xhat[i] = (x[r * n + i] - mean) * rstd;
      g[i] = dy[r * n + i] * (weight ? static_cast<double>(weight[i]) : 1.0);
      g_mean += g[i] / static_cast<double>(n);
      gx_mean += g[i] * xhat[i] / static_cast<double>(n);
      dw[i] += dy[r * n + i] * xhat[i];
      db[i] += dy[r * n + i];
    }
    for (int64_t i = 0; dx && i < n; ++i) {
      dx[r * n + i] = static_cast<T>(dx[r * n + i] + rstd * (g[i] - g_mean - xhat[i] * gx_mean));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if (dweight) dweight[i] = static_cast<T>(dweight[i] + dw[i]);
    if (dbias) dbias[i] = static_cast<T>(dbias[i] + db[i]);
  }
}

#define VIT_INSTANTIATE(T)                                                                                             \
  template void layernorm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double);              \
  template void layernorm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t); \
  template void layernorm_forward_ref<T>(const T*, const T*, const T*, T*, int64_t, int64_t, double);                  \
  template void layernorm_backward_ref<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
