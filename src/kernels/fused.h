// Fused float32 kernels for the inference path (infer/inference.h): each is one pass over memory
// where the autograd graph would make two or three, and each runs its rows in parallel. (The
// Linear layer with its bias / GELU / residual epilogues is kernels/linear.h.)
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace vit::kernels {

// y (rows, n) = tanh(y + bias), in place (timm's pre-logits).
void bias_tanh_inplace(float* y, const float* bias, int64_t rows, int64_t n);

// The MLP activations the GEMM epilogue does not fuse, in place over n values: QuickGELU
// (OpenAI CLIP) x * sigmoid(1.702 x), and ReLU; NaN stays NaN.
void quick_gelu_inplace(float* y, int64_t n);
void relu_inplace(float* y, int64_t n);

// x (rows, D) += branch (rows, D) * gamma (D): a LayerScale'd residual.
void add_scaled_rows(float* x, const float* branch, const float* gamma, int64_t rows, int64_t D);

// planes (B, S, HW) from rows (B, HW, S): a convolution's GEMM output as image planes.
void rows_to_planes(const float* rows, int64_t B, int64_t HW, int64_t S, float* planes);

// The token sequence x (B, N, D) of a ViT: for each image, the prefix rows prefix_rows[0 ..
// prefix) (class, distillation, register tokens: each a (D) row) then patches (B, N - prefix, D),
// plus the position table pos: (N, D) when it covers the prefix (pos_covers_prefix), else
// (N - prefix, D) added to the patch rows only.
void embed_tokens(const float* const* prefix_rows, int64_t prefix, const float* patches, const float* pos,
                  bool pos_covers_prefix, int64_t B, int64_t N, int64_t D, float* x);

// Self-attention without saving probabilities or dropout: out (B, N, D) from qkv (B, N, 3D) as
// attention_forward computes it. Work is split over (batch, head, block of queries), so batch 1
// with few heads still uses every thread, and only a (queries x N) block of scores per thread
// is ever written (never the whole N x N matrix per head).
void attention_inference(const AttentionShape& s, const float* qkv, double scale, float* out);

}  // namespace vit::kernels

namespace vit::kernels {

// Reference for bias_tanh_inplace, written for reading: y (rows, n) = tanh(y + bias) in double,
// in place; bias (n) broadcast over rows, or null for none.
template <typename T>
void bias_tanh_ref(T* y, const T* bias, int64_t rows, int64_t n);

// References for quick_gelu_inplace and relu_inplace: one value at a time, in double.
double quick_gelu_ref(double x);
double relu_ref(double x);

}  // namespace vit::kernels
