// Fused inference kernels (see fused.h).
#include "kernels/fused.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/softmax.h"
#include "kernels/threads.h"
#include "kernels/vmath.h"

namespace vit::kernels {
namespace {

constexpr int64_t kParallelElements = 1 << 14;

}  // namespace

void bias_tanh_inplace(float* y, const float* bias, int64_t rows, int64_t n) {
  parallel_for(rows, rows * n > kParallelElements, [&](int64_t r) {
    float* yr = y + r * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = std::tanh(yr[i] + (bias ? bias[i] : 0.0f));
  });
}

void quick_gelu_inplace(float* y, int64_t n) {
  parallel_for(n, n > (1 << 15), [&](int64_t i) {
    const float x = y[i];
    float a = -1.702f * std::fabs(x);
    a = a == a ? a : 0.0f;        // NaN: any finite exponent (x * s stays NaN)
    const float t = exp_fast(a);  // exp(-1.702 |x|) in (0, 1]
    y[i] = x * (x >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t));
  });
}

void relu_inplace(float* y, int64_t n) {
  parallel_for(n, n > (1 << 15), [&](int64_t i) { y[i] = y[i] > 0.0f ? y[i] : (y[i] == y[i] ? 0.0f : y[i]); });
}

void add_scaled_rows(float* x, const float* branch, const float* gamma, int64_t rows, int64_t D) {
  parallel_for(rows, rows * D > kParallelElements, [&](int64_t r) {
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) x[r * D + i] += branch[r * D + i] * gamma[i];
  });
}

void rows_to_planes(const float* rows, int64_t B, int64_t HW, int64_t S, float* planes) {
  parallel_for(B, B > 1, [&](int64_t b) {
    for (int64_t s = 0; s < S; ++s) {
      const float* __restrict src = rows + b * HW * S + s;
      float* __restrict dst = planes + (b * S + s) * HW;
      for (int64_t i = 0; i < HW; ++i) dst[i] = src[i * S];
    }
  });
}

void embed_tokens(const float* const* prefix_rows, int64_t prefix, const float* patches, const float* pos,
                  bool pos_covers_prefix, int64_t B, int64_t N, int64_t D, float* x) {
  const int64_t rows = B * N, P = N - prefix;
  parallel_for(rows, rows * D > kParallelElements, [&](int64_t r) {
    const int64_t t = r % N;
    float* __restrict xr = x + r * D;
    if (t < prefix) {
      const float* __restrict src = prefix_rows[t];
      if (pos_covers_prefix) {
        const float* __restrict pr = pos + t * D;
        for (int64_t i = 0; i < D; ++i) xr[i] = src[i] + pr[i];
      } else {
        for (int64_t i = 0; i < D; ++i) xr[i] = src[i];
      }
    } else {
      const float* __restrict src = patches + ((r / N) * P + t - prefix) * D;
      const float* __restrict pr = pos + (pos_covers_prefix ? t : t - prefix) * D;
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) xr[i] = src[i] + pr[i];
    }
  });
}

void attention_inference(const AttentionShape& s, const float* qkv, double scale, float* out) {
  const int64_t N = s.tokens, HD = s.head_dim, D = s.dim(), row = 3 * D;
  const int64_t pairs = s.batch * s.num_heads;
  const int threads = omp_get_max_threads();
  // Enough tasks for every thread (about 4 each), as a multiple of the thread count where one is
  // near (ViT-Ti's 3 heads in 3 blocks gave 5 and 4 tasks to 2 threads), but blocks of at least 16
  // queries.
  int64_t wanted = std::max<int64_t>(1, (4 * threads + pairs - 1) / pairs);
  for (int64_t more = 0; more < threads; ++more) {
    if (pairs * (wanted + more) % threads == 0) {
      wanted += more;
      break;
    }
  }
  const int64_t block = std::max<int64_t>(std::min<int64_t>(16, N), (N + wanted - 1) / wanted);
  const int64_t blocks = (N + block - 1) / block;
  const int64_t tasks = pairs * blocks;
  // With the packed GEMM (AVX2 and up), each thread packs a head's K^T and V once for all its
  // query blocks of that head (a static schedule hands a thread consecutive tasks), then runs
  // its blocks on the micro-kernels: BLAS would copy both operands again for every block.
  const bool packed = packed_gemm_supported();
#pragma omp parallel if (tasks > 1 && N * N * HD * pairs > kParallelElements)
  {
    std::vector<float> scores(static_cast<size_t>(block * N));
    // The packed K^T (HD, N) and V (N, HD) of head `packed_bh` (64-byte aligned, as the kernels load).
    const AlignedArray<float> kt = aligned_array<float>(packed ? packed_size(HD, N) : 0, false);
    const AlignedArray<float> vp = aligned_array<float>(packed ? packed_size(N, HD) : 0, false);
    int64_t packed_bh = -1;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t bh = t / blocks, q0 = (t % blocks) * block, rows = std::min(block, N - q0);
      const int64_t b = bh / s.num_heads, h = bh % s.num_heads;
      const float* q = qkv + (b * N + q0) * row + h * HD;  // (rows, HD), row stride 3D
      const float* k = qkv + b * N * row + D + h * HD;     // (N, HD)
      const float* v = k + D;                              // (N, HD)
      float* o = out + (b * N + q0) * D + h * HD;          // (rows, HD), row stride D
      if (!packed) {
        gemm<float>(false, true, rows, N, HD, static_cast<float>(scale), q, row, k, row, 0.0f, scores.data(), N);
        softmax_forward<float>(scores.data(), scores.data(), rows, N);
        gemm<float>(false, false, rows, HD, N, 1.0f, scores.data(), N, v, row, 0.0f, o, D);
        continue;
      }
      if (bh != packed_bh) {
        pack_b(k, HD, N, row, true, kt.get());   // B = K^T: column n is key row n
        pack_b(v, N, HD, row, false, vp.get());  // B = V
        packed_bh = bh;
      }
      const Epilogue scaled{static_cast<float>(scale), 0.0f, Activation::None};
      packed_gemm(false, q, row, rows, kt.get(), HD, N, scores.data(), N, nullptr, scaled);
      softmax_forward<float>(scores.data(), scores.data(), rows, N);
      packed_gemm(false, scores.data(), N, rows, vp.get(), N, HD, o, D, nullptr, Epilogue::Store);
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

double quick_gelu_ref(double x) { return x / (1.0 + std::exp(-1.702 * x)); }

double relu_ref(double x) { return x > 0.0 || std::isnan(x) ? x : 0.0; }

template void bias_tanh_ref<float>(float*, const float*, int64_t, int64_t);
template void bias_tanh_ref<double>(double*, const double*, int64_t, int64_t);

}  // namespace vit::kernels
