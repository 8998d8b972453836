// Fused multi-head self-attention core on the packed qkv projection, as timm lays it out:
//   qkv (B, N, 3, NH, HD) -> q, k, v (B, NH, N, HD) [read in place through strides, no copies]
//   S = q k^T * scale (B, NH, N, N); P = softmax(S); P' = P * mask (dropout, optional)
//   out (B, N, NH, HD) = P' v   [= (B, N, D) with heads merged, ready for the output projection]
// Forward saves P (B, NH, N, N); backward accumulates into dqkv (B, N, 3D):
//   dP' = dout v^T; dv += P'^T dout; dP = dP' * mask; dS = P * (dP - rowsum(dP * P));
//   dq += scale dS k; dk += scale dS^T q.
// (B, NH) pairs run in parallel; each uses single-threaded GEMM calls on strided sub-matrices
// (float: kernels/gemm/small_gemm.h; float without dropout for up to 16 tokens and heads of up to 16:
// whole pairs in tiles, kernels/attention_small.h), and the first head of an image asks for the
// next image's rows.
#pragma once

#include <cstdint>

namespace vit::kernels {

struct AttentionShape {
  int64_t batch;      // B
  int64_t tokens;     // N
  int64_t num_heads;  // NH
  int64_t head_dim;   // HD
  int64_t dim() const { return num_heads * head_dim; }
};

// mask: (B, NH, N, N) multipliers (0 or 1/(1-p)) or null for no dropout.
template <typename T>
void attention_forward(const AttentionShape& s, const T* qkv, const T* mask, double scale, T* probs, T* out);
template <typename T>
void attention_backward(const AttentionShape& s, const T* qkv, const T* probs, const T* mask, double scale,
                        const T* dout, T* dqkv);

// References, written for reading: loops over every (b, h, i, j) in double; no BLAS, no threads.
// out (B, N, D) from qkv (B, N, 3D), mask (B, NH, N, N) or null.
template <typename T>
void attention_forward_ref(const AttentionShape& s, const T* qkv, const T* mask, double scale, T* out);
// dqkv (B, N, 3D) += the gradient of sum(dout * out) with dout (B, N, D). The same arguments as
// attention_backward less the saved probabilities, which the reference recomputes from qkv.
template <typename T>
void attention_backward_ref(const AttentionShape& s, const T* qkv, const T* mask, double scale, const T* dout, T* dqkv);

}  // namespace vit::kernels
