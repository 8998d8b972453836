// Linear forward, the one door for every caller (autograd's linear, the inference session):
//   C (M, N) = epilogue(A (M, K) @ W^T + bias),  W (N, K) row-major as nn::Linear stores it.
// The kernel picks its own path, as llm.c's matmul_forward does:
//  - float32 where the active ISA has AVX2 + FMA (kernels/cpu_features.h): the packed GEMM
//    (kernels/gemm/packed_gemm.h), W packed per call; or, through linear_forward_packed, W packed
//    once (the inference session packs every weight at load). The epilogue is fused into the last
//    store of each tile.
//  - otherwise (double, or a CPU without AVX2, or the ISA capped to Isa::Scalar: that is how the
//    tests force it): BLAS (kernels/gemm/gemm.h) and the epilogue as a second pass over C.
// Epilogues (kernels/gemm/epilogue.h): bias, bias + GELU (exact or tanh form), or accumulation into C
// (residual connections: C += A W^T + bias); alpha and beta as the GEMM's.
#pragma once

#include <cstdint>

#include "kernels/gemm/packed_gemm.h"

namespace vit::kernels {

// bias may be null; lda / ldc are row strides in elements; A and C must not overlap.
template <typename T>
void linear_forward(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                    int64_t ldc, const Epilogue& epilogue);

// W packed once (PackedMatrix::from_weight); fast where packed_gemm_supported().
void linear_forward_packed(const float* A, int64_t M, int64_t K, int64_t lda, const PackedMatrix& W, const float* bias,
                           float* C, int64_t ldc, const Epilogue& epilogue);

// The readable reference: a triple loop accumulating in double, then the epilogue.
template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, const Epilogue& epilogue);

}  // namespace vit::kernels
