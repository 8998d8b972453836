// One (image, head) pair of float attention for at most 16 tokens and a head width of at most 16
// (the small models: 16 tokens of width 12 or 16), one row of 16 in one zmm: no GEMM calls, no
// transposed copies of B, softmax and its backward on whole rows in registers. The
// same contract per pair as attention.h (no dropout mask): used by attention_forward /
// attention_backward when small_attention_fits().
#pragma once

#include <cstdint>

namespace vit::kernels {

inline constexpr int64_t kSmallAttentionTokens = 16;

inline bool small_attention_fits(int64_t tokens, int64_t head_dim) {
  return tokens <= kSmallAttentionTokens && head_dim <= kSmallAttentionTokens;
}

// q, k, v: (N, HD) rows `row` floats apart; probs (N, N); out (N, HD) rows `out_stride` apart.
using SmallAttentionForward = void (*)(const float* q, const float* k, const float* v, int64_t row, int64_t N,
                                       int64_t HD, float scale, float* probs, float* out, int64_t out_stride);
// dq, dk, dv (N, HD) rows `row` apart, accumulated (+=); dout (N, HD) rows `dout_stride` apart.
using SmallAttentionBackward = void (*)(const float* q, const float* k, const float* v, int64_t row, int64_t N,
                                        int64_t HD, float scale, const float* probs, const float* dout,
                                        int64_t dout_stride, float* dq, float* dk, float* dv);

// The AVX-512 kernels where the active ISA has AVX-512, else null (the caller keeps its GEMM path).
SmallAttentionForward small_attention_forward();
SmallAttentionBackward small_attention_backward();

}  // namespace vit::kernels
