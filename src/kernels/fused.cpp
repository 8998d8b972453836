// Fused inference kernels (see fused.h).
#include "kernels/fused.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/softmax.h"

namespace vit::kernels {
namespace {

constexpr int64_t kParallelElements = 1 << 14;

}  // namespace

void bias_tanh_inplace(float* y, const float* bias, int64_t rows, int64_t n) {
#pragma omp parallel for schedule(static) if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = std::tanh(yr[i] + (bias ? bias[i] : 0.0f));
  }
}

void attention_inference(const AttentionShape& s, const float* qkv, double scale, float* out) {
  const int64_t N = s.tokens, HD = s.head_dim, D = s.dim(), row = 3 * D;
  const int64_t pairs = s.batch * s.num_heads;
  const int threads = omp_get_max_threads();
  // Enough tasks for every thread (about 4 each), but blocks of at least 16 queries.
  const int64_t wanted = std::max<int64_t>(1, (4 * threads + pairs - 1) / pairs);
  const int64_t block = std::max<int64_t>(std::min<int64_t>(16, N), (N + wanted - 1) / wanted);
  const int64_t blocks = (N + block - 1) / block;
  const int64_t tasks = pairs * blocks;
#pragma omp parallel if (tasks > 1 && N * N * HD * pairs > kParallelElements)
  {
    std::vector<float> scores(static_cast<size_t>(block * N));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t bh = t / blocks, q0 = (t % blocks) * block, rows = std::min(block, N - q0);
      const int64_t b = bh / s.num_heads, h = bh % s.num_heads;
      const float* q = qkv + (b * N + q0) * row + h * HD;  // (rows, HD), row stride 3D
      const float* k = qkv + b * N * row + D + h * HD;     // (N, HD)
      const float* v = k + D;                              // (N, HD)
      float* o = out + (b * N + q0) * D + h * HD;          // (rows, HD), row stride D
      gemm<float>(false, true, rows, N, HD, static_cast<float>(scale), q, row, k, row, 0.0f, scores.data(), N);
      softmax_forward<float>(scores.data(), scores.data(), rows, N);
      gemm<float>(false, false, rows, HD, N, 1.0f, scores.data(), N, v, row, 0.0f, o, D);
    }
  }
}

}  // namespace vit::kernels

namespace vit::kernels {

template <typename T>
void bias_tanh_ref(T* y, const T* bias, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(y[r * n + i]) + (bias ? static_cast<double>(bias[i]) : 0.0);
      y[r * n + i] = static_cast<T>(std::tanh(x));
    }
  }
}

template void bias_tanh_ref<float>(float*, const float*, int64_t, int64_t);
template void bias_tanh_ref<double>(double*, const double*, int64_t, int64_t);

}  // namespace vit::kernels
