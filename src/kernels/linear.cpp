// Linear forward: the AVX2 micro-kernel, the BLAS fallback and the reference (see linear.h).
#include "kernels/linear.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "kernels/activation.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"

namespace vit::kernels {
namespace {

constexpr int kFeatures = 6;  // output features (weight rows) per micro-kernel call
constexpr int kPanel = 16;    // rows of A per packed panel (two AVX2 registers)

// tile (R x 16) = W (R rows, stride ldw) @ panel (K x 16)^T, i.e. tile[r][j] = sum_k W[r][k] P[k][j].
template <int R>
__attribute__((target("avx2,fma"))) void micro_kernel(const float* __restrict W, int64_t ldw, const float* __restrict P,
                                                      int64_t K, float* __restrict tile) {
  __m256 c0[R], c1[R];
  const float* w[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    c0[r] = c1[r] = _mm256_setzero_ps();
    w[r] = W + r * ldw;
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_load_ps(P + k * kPanel), b1 = _mm256_load_ps(P + k * kPanel + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(w[r] + k);
      c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(tile + r * kPanel, c0[r]);
    _mm256_store_ps(tile + r * kPanel + 8, c1[r]);
  }
}

using MicroKernel = void (*)(const float*, int64_t, const float*, int64_t, float*);
constexpr MicroKernel kKernels[kFeatures + 1] = {nullptr,         micro_kernel<1>, micro_kernel<2>, micro_kernel<3>,
                                                 micro_kernel<4>, micro_kernel<5>, micro_kernel<6>};

// The epilogue on one element: v = (A W^T)[m][n] + bias[n], c = C[m][n] before the call.
// Float32 GELU is vmath.h's (the activation kernels use the same); double uses the activation
// reference (the double path serves the gradient checks).
template <Epilogue E, typename T>
inline T finish(T v, T c) {
  if constexpr (E == Epilogue::Store) {
    return v;
  } else if constexpr (E == Epilogue::Accumulate) {
    return c + v;
  } else if constexpr (std::is_same_v<T, float>) {
    return E == Epilogue::Gelu ? gelu_fast(v) : gelu_tanh_fast(v);
  } else {
    return static_cast<T>(unary_ref(E == Epilogue::Gelu ? Unary::Gelu : Unary::GeluTanh, static_cast<double>(v)));
  }
}

// Calls fn.template operator()<E>() with the epilogue as a compile-time constant.
template <typename Fn>
void with_epilogue(Epilogue e, Fn&& fn) {
  switch (e) {
    case Epilogue::Store:
      fn.template operator()<Epilogue::Store>();
      break;
    case Epilogue::Accumulate:
      fn.template operator()<Epilogue::Accumulate>();
      break;
    case Epilogue::Gelu:
      fn.template operator()<Epilogue::Gelu>();
      break;
    case Epilogue::GeluTanh:
      fn.template operator()<Epilogue::GeluTanh>();
      break;
  }
}

// C[m][n0 + r] (epilogue)= tile[r][m - m0] for the valid rows and features.
template <Epilogue E>
void store_tile(const float* __restrict tile, int features, int64_t rows, const float* __restrict bias,
                float* __restrict C, int64_t ldc) {
  float b[kFeatures] = {};
  for (int r = 0; r < features && bias; ++r) b[r] = bias[r];
  if (features == kFeatures) {  // the common case, with a constant trip count
    for (int64_t j = 0; j < rows; ++j) {
      float* c = C + j * ldc;
#pragma GCC unroll 6
      for (int r = 0; r < kFeatures; ++r) {
        c[r] = finish<E>(tile[r * kPanel + j] + b[r], c[r]);
      }
    }
    return;
  }
  for (int64_t j = 0; j < rows; ++j) {
    float* c = C + j * ldc;
    for (int r = 0; r < features; ++r) {
      c[r] = finish<E>(tile[r * kPanel + j] + b[r], c[r]);
    }
  }
}

// Panel p (K x 16) holds rows 16p .. 16p+15 of A, transposed, zero past M.
void pack_panel(const float* A, int64_t M, int64_t K, int64_t lda, int64_t p, float* __restrict out) {
  const int64_t m0 = p * kPanel, rows = std::min<int64_t>(kPanel, M - m0);
  if (rows < kPanel) std::fill(out, out + K * kPanel, 0.0f);
  for (int64_t j = 0; j < rows; ++j) {
    const float* __restrict a = A + (m0 + j) * lda;
    for (int64_t k = 0; k < K; ++k) out[k * kPanel + j] = a[k];
  }
}

bool micro_kernel_supported() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

void linear_micro_kernel(const float* A, int64_t M, int64_t K, int64_t lda, const float* W, int64_t N,
                         const float* bias, float* C, int64_t ldc, Epilogue epilogue) {
  const int64_t panels = (M + kPanel - 1) / kPanel, blocks = (N + kFeatures - 1) / kFeatures;
  // The packed activations: one buffer per calling thread, kept for the next call.
  thread_local std::vector<float, std::allocator<float>> packed_storage;
  const size_t need = static_cast<size_t>(panels * K * kPanel) + 8;
  if (packed_storage.size() < need) packed_storage.resize(need);
  // 32-byte alignment for the panel loads.
  float* packed = packed_storage.data();
  packed += (8 - (reinterpret_cast<uintptr_t>(packed) / sizeof(float)) % 8) % 8;
  // Rows are processed in chunks of panels whose packed activations stay in L2 while every
  // weight block sweeps them (one chunk when the batch is small: then threads split the weights).
  const int64_t chunk_panels = panels <= 16 ? panels : 8;
  const int64_t chunks = (panels + chunk_panels - 1) / chunk_panels;
  const int64_t tasks = chunks * blocks;
  const bool parallel = tasks > 1 && M * N * K > (1 << 18) && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) pack_panel(A, M, K, lda, p, packed + p * K * kPanel);
      // A task is one weight block (6 output features) against one chunk of panels. Within a
      // chunk, each thread owns a contiguous range of weight rows and streams them once.
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t chunk = t / blocks, block = t % blocks;
      const int64_t n0 = block * kFeatures;
      const int features = static_cast<int>(std::min<int64_t>(kFeatures, N - n0));
      const int64_t p_begin = chunk * chunk_panels, p_end = std::min(panels, p_begin + chunk_panels);
      for (int64_t p = p_begin; p < p_end; ++p) {
        const int64_t m0 = p * kPanel;
        alignas(32) float tile[kFeatures * kPanel];
        // Weights come from memory: while this block sweeps the panels, each sweep prefetches a
        // share of the next block's rows into L2, so DRAM traffic is spread evenly instead of
        // stalling every block's first sweep.
        if (n0 + 2 * kFeatures <= N) {
          const char* next = reinterpret_cast<const char*>(W + (n0 + kFeatures) * K);
          const int64_t lines = (kFeatures * K * static_cast<int64_t>(sizeof(float)) + 63) / 64;
          const int64_t sweeps = p_end - p_begin, i = p - p_begin;
          for (int64_t l = lines * i / sweeps; l < lines * (i + 1) / sweeps; ++l)
            _mm_prefetch(next + 64 * l, _MM_HINT_T1);
        }
        kKernels[features](W + n0 * K, K, packed + p * K * kPanel, K, tile);
        const int64_t rows = std::min<int64_t>(kPanel, M - m0);
        const float* b = bias ? bias + n0 : nullptr;
        float* c = C + m0 * ldc + n0;
        with_epilogue(epilogue, [&]<Epilogue E>() { store_tile<E>(tile, features, rows, b, c, ldc); });
      }
    }
  }
}

// The fallback: BLAS for the product (accumulating into C for Accumulate), then the bias and
// the epilogue in one pass over the rows.
template <typename T>
void linear_blas(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C, int64_t ldc,
                 Epilogue epilogue) {
  const bool accumulate = epilogue == Epilogue::Accumulate;
  gemm<T>(false, true, M, N, K, T(1), A, lda, W, K, accumulate ? T(1) : T(0), C, ldc);
  if (!bias && (epilogue == Epilogue::Store || accumulate)) return;
  with_epilogue(epilogue, [&]<Epilogue E>() {
    // After the GEMM, C holds the sum: the epilogue only adds the bias (or applies GELU).
    constexpr Epilogue After = E == Epilogue::Accumulate ? Epilogue::Store : E;
#pragma omp parallel for schedule(static) if (M * N > (1 << 15))
    for (int64_t m = 0; m < M; ++m) {
      T* __restrict c = C + m * ldc;
      for (int64_t n = 0; n < N; ++n) c[n] = finish<After>(c[n] + (bias ? bias[n] : T(0)), c[n]);
    }
  });
}

}  // namespace

template <typename T>
void linear_forward(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                    int64_t ldc, Epilogue epilogue, LinearPath path) {
  VIT_CHECK(M >= 0 && K >= 0 && N >= 0 && lda >= K && ldc >= N, "linear", "invalid sizes M={} K={} N={} lda={} ldc={}",
            M, K, N, lda, ldc);
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (path == LinearPath::Auto && K > 0 && micro_kernel_supported()) {
      linear_micro_kernel(A, M, K, lda, W, N, bias, C, ldc, epilogue);
      return;
    }
  }
  linear_blas<T>(A, M, K, std::max<int64_t>(lda, 1), W, N, bias, C, ldc, epilogue);
}

template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, Epilogue epilogue) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double sum = bias ? static_cast<double>(bias[n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(A[m * lda + k]) * static_cast<double>(W[n * K + k]);
      T& c = C[m * ldc + n];
      switch (epilogue) {
        case Epilogue::Store:
          c = static_cast<T>(sum);
          break;
        case Epilogue::Accumulate:
          c = static_cast<T>(static_cast<double>(c) + sum);
          break;
        case Epilogue::Gelu:
          c = static_cast<T>(unary_ref(Unary::Gelu, sum));
          break;
        case Epilogue::GeluTanh:
          c = static_cast<T>(unary_ref(Unary::GeluTanh, sum));
          break;
      }
    }
  }
}

#define VIT_INSTANTIATE(T)                                                                                           \
  template void linear_forward<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t,     \
                                  Epilogue, LinearPath);                                                             \
  template void linear_forward_ref<T>(const T*, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t, \
                                      Epilogue);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
