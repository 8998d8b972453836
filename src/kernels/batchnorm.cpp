// Batch normalisation kernels (see batchnorm.h). Channels run in parallel; within a channel the
// B planes of S values are summed in double (omp simd may reassociate the sums, so they vectorise).
#include "kernels/batchnorm.h"

#include <omp.h>

#include <cstddef>
#include <vector>

#include "kernels/threads.h"

namespace vit::kernels {

namespace {

// Work worth threads: a few hundred thousand values.
bool big(int64_t B, int64_t C, int64_t S) { return B * C * S >= (int64_t{1} << 16); }

// Per-column sums over the rows [0, P) of `columns` sums each (out: columns x C, in double):
// row(p, sums) adds row p's terms. The rows are split over the threads, each with its own partial
// sums, added in thread order (the same result for a given thread count).
template <typename Row>
std::vector<double> column_sums(int64_t P, int64_t C, int columns, bool parallel, Row&& row) {
  const int threads = parallel ? omp_get_max_threads() : 1;
  const auto width = static_cast<std::size_t>(columns * C);
  std::vector<double> parts(static_cast<std::size_t>(threads) * width, 0.0);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    double* sums = parts.data() + static_cast<std::size_t>(omp_get_thread_num()) * width;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < P; ++p) row(p, sums);
  }
  std::vector<double> total(width, 0.0);
  for (int t = 0; t < threads; ++t) {
    for (std::size_t i = 0; i < width; ++i) total[i] += parts[static_cast<std::size_t>(t) * width + i];
  }
  return total;
}

}  // namespace

template <typename T>
void batchnorm_stats_rows(const T* x, int64_t P, int64_t C, T* mean, T* var) {
  const bool parallel = parallel_worth(P * C >= (int64_t{1} << 16));
  const std::vector<double> sum = column_sums(P, C, 1, parallel, [&](int64_t p, double* s) {
    const T* r = x + p * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) s[c] += r[c];
  });
  std::vector<double> m(static_cast<std::size_t>(C));
  for (int64_t c = 0; c < C; ++c) m[c] = P > 0 ? sum[c] / static_cast<double>(P) : 0.0;
  const std::vector<double> sq = column_sums(P, C, 1, parallel, [&](int64_t p, double* s) {
    const T* r = x + p * C;
    const double* mc = m.data();
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) s[c] += (r[c] - mc[c]) * (r[c] - mc[c]);
  });
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = static_cast<T>(m[c]);
    var[c] = static_cast<T>(P > 0 ? sq[c] / static_cast<double>(P) : 0.0);
  }
}

template <typename T>
void batchnorm_forward_rows(const T* x, const T* mean, const T* rstd, const T* weight, const T* bias, T* y, int64_t P,
                            int64_t C) {
  std::vector<T> scale(static_cast<std::size_t>(C)), shift(static_cast<std::size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    scale[c] = rstd[c] * (weight ? weight[c] : T(1));
    shift[c] = (bias ? bias[c] : T(0)) - mean[c] * scale[c];
  }
  const T* sc = scale.data();
  const T* sh = shift.data();
  parallel_for(P, P * C >= (int64_t{1} << 16), [&](int64_t p) {
    const T* r = x + p * C;
    T* q = y + p * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) q[c] = r[c] * sc[c] + sh[c];
  });
}

template <typename T>
void batchnorm_backward_rows(const T* x, const T* mean, const T* rstd, const T* weight, const T* dy, T* dx, T* dweight,
                             T* dbias, int64_t P, int64_t C, bool batch_stats) {
  const bool parallel = parallel_worth(P * C >= (int64_t{1} << 16));
  // sums[c] = sum of dy, sums[C + c] = sum of dy * xhat.
  const std::vector<double> sums = column_sums(P, C, 2, parallel, [&](int64_t p, double* s) {
    const T* xr = x + p * C;
    const T* gr = dy + p * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      s[c] += gr[c];
      s[C + c] += gr[c] * ((xr[c] - mean[c]) * rstd[c]);
    }
  });
  for (int64_t c = 0; c < C; ++c) {
    if (dbias) dbias[c] += static_cast<T>(sums[c]);
    if (dweight) dweight[c] += static_cast<T>(sums[C + c]);
  }
  if (!dx) return;
  std::vector<T> k(static_cast<std::size_t>(C)), mean_dy(static_cast<std::size_t>(C)),
      mean_dy_xhat(static_cast<std::size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    k[c] = rstd[c] * (weight ? weight[c] : T(1));
    mean_dy[c] = batch_stats && P > 0 ? static_cast<T>(sums[c] / static_cast<double>(P)) : T(0);
    mean_dy_xhat[c] = batch_stats && P > 0 ? static_cast<T>(sums[C + c] / static_cast<double>(P)) : T(0);
  }
  const T* kc = k.data();
  const T* md = mean_dy.data();
  const T* mx = mean_dy_xhat.data();
  parallel_for(P, parallel, [&](int64_t p) {
    const T* xr = x + p * C;
    const T* gr = dy + p * C;
    T* dr = dx + p * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dr[c] += kc[c] * (gr[c] - md[c] - ((xr[c] - mean[c]) * rstd[c]) * mx[c]);
  });
}

template <typename T>
void batchnorm_stats(const T* x, int64_t B, int64_t C, int64_t S, T* mean, T* var) {
  const auto n = static_cast<double>(B * S);
  parallel_for(C, big(B, C, S), [&](int64_t c) {
    double sum = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const T* p = x + (b * C + c) * S;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < S; ++i) sum += p[i];
    }
    const double m = n > 0 ? sum / n : 0.0;
    double sq = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const T* p = x + (b * C + c) * S;
#pragma omp simd reduction(+ : sq)
      for (int64_t i = 0; i < S; ++i) sq += (p[i] - m) * (p[i] - m);
    }
    mean[c] = static_cast<T>(m);
    var[c] = static_cast<T>(n > 0 ? sq / n : 0.0);
  });
}

template <typename T>
void batchnorm_forward(const T* x, const T* mean, const T* rstd, const T* weight, const T* bias, T* y, int64_t B,
                       int64_t C, int64_t S) {
  parallel_for(B * C, big(B, C, S), [&](int64_t bc) {
    const int64_t c = bc % C;
    // y = x * scale + shift, scale = rstd * w, shift = b - mean * scale.
    const T scale = rstd[c] * (weight ? weight[c] : T(1));
    const T shift = (bias ? bias[c] : T(0)) - mean[c] * scale;
    const T* p = x + bc * S;
    T* q = y + bc * S;
#pragma omp simd
    for (int64_t i = 0; i < S; ++i) q[i] = p[i] * scale + shift;
  });
}

template <typename T>
void batchnorm_backward(const T* x, const T* mean, const T* rstd, const T* weight, const T* dy, T* dx, T* dweight,
                        T* dbias, int64_t B, int64_t C, int64_t S, bool batch_stats) {
  const auto n = static_cast<double>(B * S);
  parallel_for(C, big(B, C, S), [&](int64_t c) {
    const T m = mean[c], s = rstd[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const T* xp = x + (b * C + c) * S;
      const T* gp = dy + (b * C + c) * S;
#pragma omp simd reduction(+ : sum_dy, sum_dy_xhat)
      for (int64_t i = 0; i < S; ++i) {
        sum_dy += gp[i];
        sum_dy_xhat += gp[i] * ((xp[i] - m) * s);
      }
    }
    if (dbias) dbias[c] += static_cast<T>(sum_dy);
    if (dweight) dweight[c] += static_cast<T>(sum_dy_xhat);
    if (!dx) return;
    const T k = s * (weight ? weight[c] : T(1));
    const T mean_dy = batch_stats && n > 0 ? static_cast<T>(sum_dy / n) : T(0);
    const T mean_dy_xhat = batch_stats && n > 0 ? static_cast<T>(sum_dy_xhat / n) : T(0);
    for (int64_t b = 0; b < B; ++b) {
      const T* xp = x + (b * C + c) * S;
      const T* gp = dy + (b * C + c) * S;
      T* dp = dx + (b * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) dp[i] += k * (gp[i] - mean_dy - ((xp[i] - m) * s) * mean_dy_xhat);
    }
  });
}

#define VIT_BATCHNORM_INSTANTIATE(T)                                                                                   \
  template void batchnorm_stats<T>(const T*, int64_t, int64_t, int64_t, T*, T*);                                       \
  template void batchnorm_forward<T>(const T*, const T*, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t); \
  template void batchnorm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t,  \
                                      int64_t, bool);
VIT_BATCHNORM_INSTANTIATE(float)
VIT_BATCHNORM_INSTANTIATE(double)
#undef VIT_BATCHNORM_INSTANTIATE

#define VIT_BATCHNORM_ROWS_INSTANTIATE(T)                                                                          \
  template void batchnorm_stats_rows<T>(const T*, int64_t, int64_t, T*, T*);                                       \
  template void batchnorm_forward_rows<T>(const T*, const T*, const T*, const T*, const T*, T*, int64_t, int64_t); \
  template void batchnorm_backward_rows<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t,  \
                                           int64_t, bool);
VIT_BATCHNORM_ROWS_INSTANTIATE(float)
VIT_BATCHNORM_ROWS_INSTANTIATE(double)
#undef VIT_BATCHNORM_ROWS_INSTANTIATE

}  // namespace vit::kernels
