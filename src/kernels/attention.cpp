// Fused attention kernels (see attention.h).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/attention_small.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/small_gemm.h"
#include "kernels/isa_target.h"
#include "kernels/softmax.h"
#include "kernels/threads.h"

namespace vit::kernels {
namespace {

// One head's products: float through the small-operand kernel, double through BLAS.
template <typename T>
void head_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    small_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    gemm<T>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// Softmax backward on the rows of one head, in place: dP (N, N) becomes
// dS = P * (dP' - rowsum(dP' * P)) with dP' = dP * mask (mask null: no dropout). omp simd: the
// row sums may be reassociated, so the loops vectorise; the float rows are compiled per ISA.
template <typename T>
inline void softmax_grad_rows(T* __restrict dp, const T* __restrict p, const T* __restrict mask, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    T* d = dp + i * N;
    const T* pr = p + i * N;
    if (mask) {
      const T* m = mask + i * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) d[j] *= m[j];
    }
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < N; ++j) dot += d[j] * pr[j];
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) d[j] = pr[j] * (d[j] - dot);
  }
}

template <typename T>
using SoftmaxGradRows = void (*)(T*, const T*, const T*, int64_t);
[[gnu::flatten]] void softmax_grad_plain(float* dp, const float* p, const float* mask, int64_t N) {
  softmax_grad_rows(dp, p, mask, N);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void softmax_grad_avx2(float* dp, const float* p, const float* mask, int64_t N) {
  softmax_grad_rows(dp, p, mask, N);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void softmax_grad_avx512(float* dp, const float* p, const float* mask, int64_t N) {
  softmax_grad_rows(dp, p, mask, N);
}

// Asks for `rows` rows of `bytes` each, `stride` elements apart, into L2: the next image's
// operands while this one's heads run (its rows are spread over many lines, and the first head
// to touch them would otherwise wait on each).
template <typename T>
void prefetch_rows(const T* p, int64_t rows, int64_t stride, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(p + r * stride);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
  }
}

}  // namespace

template <typename T>
void attention_forward(const AttentionShape& s, const T* qkv, const T* mask, double scale, T* probs, T* out) {
  const int64_t N = s.tokens, HD = s.head_dim, D = s.dim(), row = 3 * D;
  const int64_t pairs = s.batch * s.num_heads;
  // Float, no dropout, up to 16 tokens and a head of up to 16: whole pairs in tiles (attention_small.h).
  SmallAttentionForward small = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (!mask && small_attention_fits(N, HD)) small = small_attention_forward();
  }
  // One (image, head) pair; the scratch is per thread.
  auto pair = [&](int64_t bh, std::vector<T>& dropped) {
    const int64_t b = bh / s.num_heads, h = bh % s.num_heads;
    const T* q = qkv + b * N * row + h * HD;  // (N, HD), row stride 3D
    const T* k = q + D;
    const T* v = q + 2 * D;
    T* p = probs + bh * N * N;        // (N, N)
    T* o = out + b * N * D + h * HD;  // (N, HD), row stride D
    if (h == 0 && b + 1 < s.batch) prefetch_rows(qkv + (b + 1) * N * row, N, row, row);
    if constexpr (std::is_same_v<T, float>) {
      if (small) return small(q, k, v, row, N, HD, static_cast<float>(scale), p, o, D);
    }
    head_gemm<T>(false, true, N, N, HD, static_cast<T>(scale), q, row, k, row, T(0), p, N);
    softmax_forward<T>(p, p, N, N);
    const T* weights = p;
    if (mask) {
      const T* m = mask + bh * N * N;
      for (int64_t i = 0; i < N * N; ++i) dropped[i] = p[i] * m[i];
      weights = dropped.data();
    }
    head_gemm<T>(false, false, N, HD, N, T(1), weights, N, v, row, T(0), o, D);
  };
  if (!parallel_worth(pairs > 1)) {            // no team at all (threads.h)
    std::vector<T> dropped(mask ? N * N : 0);  // per-thread scratch for P * mask
    for (int64_t bh = 0; bh < pairs; ++bh) pair(bh, dropped);
    return;
  }
#pragma omp parallel
  {
    std::vector<T> dropped(mask ? N * N : 0);  // per-thread scratch for P * mask
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) pair(bh, dropped);
  }
}

template <typename T>
void attention_backward(const AttentionShape& s, const T* qkv, const T* probs, const T* mask, double scale,
                        const T* dout, T* dqkv) {
  const int64_t N = s.tokens, HD = s.head_dim, D = s.dim(), row = 3 * D;
  const int64_t pairs = s.batch * s.num_heads;
  SoftmaxGradRows<T> softmax_grad = softmax_grad_rows<T>;
  if constexpr (std::is_same_v<T, float>)
    softmax_grad = per_isa<SoftmaxGradRows<float>>(softmax_grad_plain, softmax_grad_avx2, softmax_grad_avx512);
  SmallAttentionBackward small = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (!mask && small_attention_fits(N, HD)) small = small_attention_backward();
  }
  // One (image, head) pair; the scratch is per thread.
  auto pair = [&](int64_t bh, std::vector<T>& dp, std::vector<T>& dropped) {
    const int64_t b = bh / s.num_heads, h = bh % s.num_heads;
    const T* q = qkv + b * N * row + h * HD;
    const T* k = q + D;
    const T* v = q + 2 * D;
    T* dq = dqkv + b * N * row + h * HD;
    T* dk = dq + D;
    T* dv = dq + 2 * D;
    const T* p = probs + bh * N * N;
    const T* m = mask ? mask + bh * N * N : nullptr;
    const T* dO = dout + b * N * D + h * HD;  // (N, HD), row stride D
    if (h == 0 && b + 1 < s.batch) {          // the next image: its qkv, dqkv, dout and probabilities
      prefetch_rows(qkv + (b + 1) * N * row, N, row, row);
      prefetch_rows(dqkv + (b + 1) * N * row, N, row, row);
      prefetch_rows(dout + (b + 1) * N * D, N, D, D);
      prefetch_rows(probs + (b + 1) * s.num_heads * N * N, s.num_heads, N * N, N * N);
    }
    if constexpr (std::is_same_v<T, float>) {
      if (small) return small(q, k, v, row, N, HD, static_cast<float>(scale), p, dO, D, dq, dk, dv);
    }
    const T* p_used = p;
    if (m) {
      for (int64_t i = 0; i < N * N; ++i) dropped[i] = p[i] * m[i];
      p_used = dropped.data();
    }
    // dv (N, HD) += P'^T (N, N) @ dO (N, HD)
    head_gemm<T>(true, false, N, HD, N, T(1), p_used, N, dO, D, T(1), dv, row);
    // dP' (N, N) = dO (N, HD) @ v^T (HD, N)
    head_gemm<T>(false, true, N, N, HD, T(1), dO, D, v, row, T(0), dp.data(), N);
    // dS = P * (dP - rowsum(dP * P)), with dP = dP' * mask; stored back into dp.
    softmax_grad(dp.data(), p, m, N);
    // dq (N, HD) += scale dS (N, N) @ k (N, HD);  dk (N, HD) += scale dS^T @ q
    head_gemm<T>(false, false, N, HD, N, static_cast<T>(scale), dp.data(), N, k, row, T(1), dq, row);
    head_gemm<T>(true, false, N, HD, N, static_cast<T>(scale), dp.data(), N, q, row, T(1), dk, row);
  };
  if (!parallel_worth(pairs > 1)) {  // no team at all (threads.h)
    std::vector<T> dp(N * N), dropped(mask ? N * N : 0);
    for (int64_t bh = 0; bh < pairs; ++bh) pair(bh, dp, dropped);
    return;
  }
#pragma omp parallel
  {
    std::vector<T> dp(N * N), dropped(mask ? N * N : 0);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < pairs; ++bh) pair(bh, dp, dropped);
  }
}

template <typename T>
void attention_forward_ref(const AttentionShape& s, const T* qkv, const T* mask, double scale, T* out) {
  const int64_t N = s.tokens, HD = s.head_dim, D = s.dim(), row = 3 * D;
  std::vector<double> p(N);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.num_heads; ++h) {
      for (int64_t i = 0; i < N; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < N; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < HD; ++d) {
            dot += static_cast<double>(qkv[(b * N + i) * row + h * HD + d]) * qkv[(b * N + j) * row + D + h * HD + d];
          }
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t d = 0; d < HD; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < N; ++j) {
            const double weight = p[j] / sum * (mask ? mask[((b * s.num_heads + h) * N + i) * N + j] : 1.0);
            acc += weight * qkv[(b * N + j) * row + 2 * D + h * HD + d];
          }
          out[(b * N + i) * D + h * HD + d] = static_cast<T>(acc);
        }
      }
    }
  }
}

template <typename T>
void attention_backward_ref(const AttentionShape& s, const T* qkv, const T* mask, double scale, const T* dout,
                            T* dqkv) {
  const int64_t N = s.tokens, NH = s.num_heads, HD = s.head_dim, D = s.dim(), row = 3 * D;
  // Offsets of element (token j, feature d) of head h's q, k, v in qkv / dqkv (B, N, 3, NH, HD).
  auto q_at = [&](int64_t b, int64_t j, int64_t h, int64_t d) { return (b * N + j) * row + h * HD + d; };
  auto k_at = [&](int64_t b, int64_t j, int64_t h, int64_t d) { return q_at(b, j, h, d) + D; };
  auto v_at = [&](int64_t b, int64_t j, int64_t h, int64_t d) { return q_at(b, j, h, d) + 2 * D; };
  std::vector<double> grad(static_cast<size_t>(s.batch * N * row), 0.0);  // (B, N, 3D), summed in double
  std::vector<double> p(N), dp(N);                                        // one query row i: P[i, :], dP[i, :]
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t i = 0; i < N; ++i) {
        // P[i, j] = softmax_j(scale * q_i . k_j), recomputed as the forward does.
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < HD; ++d) dot += static_cast<double>(qkv[q_at(b, i, h, d)]) * qkv[k_at(b, j, h, d)];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < N; ++j) p[j] /= sum;
        // out_i = sum_j P[i, j] m[i, j] v_j, so with dO_i = dout[b, i, h, :]:
        //   dv_j += P[i, j] m[i, j] dO_i;   dP[i, j] = m[i, j] (dO_i . v_j).
        const T* dO = dout + (b * N + i) * D + h * HD;  // (HD)
        for (int64_t j = 0; j < N; ++j) {
          const double m = mask ? static_cast<double>(mask[((b * NH + h) * N + i) * N + j]) : 1.0;
          double dot = 0;
          for (int64_t d = 0; d < HD; ++d) {
            dot += static_cast<double>(dO[d]) * qkv[v_at(b, j, h, d)];
            grad[v_at(b, j, h, d)] += p[j] * m * dO[d];
          }
          dp[j] = dot * m;
        }
        // Softmax backward: dS[i, j] = P[i, j] (dP[i, j] - sum_l dP[i, l] P[i, l]).
        // S[i, j] = scale q_i . k_j:  dq_i += scale dS[i, j] k_j;  dk_j += scale dS[i, j] q_i.
        double row_dot = 0;
        for (int64_t j = 0; j < N; ++j) row_dot += dp[j] * p[j];
        for (int64_t j = 0; j < N; ++j) {
          const double ds = p[j] * (dp[j] - row_dot);
          for (int64_t d = 0; d < HD; ++d) {
            grad[q_at(b, i, h, d)] += scale * ds * qkv[k_at(b, j, h, d)];
            grad[k_at(b, j, h, d)] += scale * ds * qkv[q_at(b, i, h, d)];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < grad.size(); ++i) dqkv[i] = static_cast<T>(dqkv[i] + grad[i]);  // accumulate, rounding once
}

#define VIT_INSTANTIATE(T)                                                                                        \
  template void attention_forward<T>(const AttentionShape&, const T*, const T*, double, T*, T*);                  \
  template void attention_backward<T>(const AttentionShape&, const T*, const T*, const T*, double, const T*, T*); \
  template void attention_forward_ref<T>(const AttentionShape&, const T*, const T*, double, T*);                  \
  template void attention_backward_ref<T>(const AttentionShape&, const T*, const T*, double, const T*, T*);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
