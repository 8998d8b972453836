// bfloat16 GEMMs for mixed-precision training (`vit train --precision bf16`), as PyTorch's CPU
// autocast runs a Linear: both operands rounded to bfloat16 (to nearest even), products summed in
// float32, alpha / beta applied in float32:
//   C (M, N) = alpha * bf16(op(A)) (M, K) @ bf16(op(B)) (K, N) + beta * C,  op(X) = X or X^T
// with row strides lda / ldb / ldc as kernels::gemm takes them (beta 0: C is not read). Built on
// the inference kernel (kernels/gemm/bf16_gemm.h): op(B) is laid out as an (N, K) weight and packed
// with Bf16Matrix::from_weight, op(A) as (M, K) rows (copied only when transposed), and
// linear_bf16 computes the product with the epilogue {alpha, beta}. AVX512_BF16 where the CPU has
// it, else the kernel's plain C++ path (same inputs, float32 accumulation; bf16_gemm_native()).
// Correct first: every call packs op(B) anew (the digits model's GEMMs are small); the autograd
// Linear and conv2d ops call it for the forward, dX and dW products.
#pragma once

#include <cstdint>

namespace vit::kernels {

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// y (M, N; row stride ldy) = bf16(x) (M, K; row stride lda) @ bf16(W)^T + bias, W (N, K) row-major
// as nn::Linear stores it; bias may be null. The forward of a bf16 Linear (W packed per call).
void linear_forward_bf16(const float* x, int64_t M, int64_t K, int64_t lda, const float* W, int64_t N,
                         const float* bias, float* y, int64_t ldy);

// The reference: the same bf16-rounded inputs, products summed in double, alpha / beta in double.
void gemm_bf16_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace vit::kernels
