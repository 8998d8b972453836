// Fused float32 kernels for the inference path (infer/inference.h): each is one pass over memory
// where the autograd graph would make two or three, and each runs its rows in parallel. (The
// Linear layer with its bias / GELU / residual epilogues is kernels/linear.h.)
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace vit::kernels {

// y (rows, n) = tanh(y + bias), in place (timm's pre-logits).
void bias_tanh_inplace(float* y, const float* bias, int64_t rows, int64_t n);

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

}  // namespace vit::kernels
