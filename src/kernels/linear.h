// Linear forward, the one door for every caller (autograd's linear, the inference session):
//   C (M, N) = epilogue(A (M, K) @ W^T + bias),  W (N, K) row-major as nn::Linear stores it.
// The kernel picks its own path, as llm.c's matmul_forward does:
//  - float32 on a CPU with AVX2 + FMA: the packed GEMM (kernels/packed_gemm.h), W packed per
//    call; or, through linear_forward_packed, W packed once (the inference session packs every
//    weight at load). The epilogue is fused into the last store of each tile.
//  - otherwise (double, or a CPU without AVX2): BLAS (kernels/gemm.h) and the epilogue as a
//    second pass over C.
// Epilogues: bias, bias + GELU (exact or tanh form, kernels/vmath.h), or accumulation into C
// (residual connections: C += A W^T + bias).
#pragma once

#include <cstdint>

#include "kernels/packed_gemm.h"

namespace vit::kernels {

enum class Epilogue {
  Store,       // C = A W^T + bias
  Accumulate,  // C += A W^T + bias
  Gelu,        // C = gelu(A W^T + bias), exact (erf) GELU
  GeluTanh,    // C = gelu(A W^T + bias), tanh approximation
};

// Auto: the micro-kernel where it runs (float32, AVX2 + FMA), else BLAS. Blas forces the
// fallback (tests check both paths on the same machine).
enum class LinearPath { Auto, Blas };

// bias may be null; lda / ldc are row strides in elements; A and C must not overlap.
template <typename T>
void linear_forward(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                    int64_t ldc, Epilogue epilogue, LinearPath path = LinearPath::Auto);

// W packed once (PackedMatrix::from_weight); float32 on AVX2 + FMA only (packed_gemm_supported()).
void linear_forward_packed(const float* A, int64_t M, int64_t K, int64_t lda, const PackedMatrix& W, const float* bias,
                           float* C, int64_t ldc, Epilogue epilogue);

// The readable reference: a triple loop accumulating in double, then the epilogue.
template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, Epilogue epilogue);

}  // namespace vit::kernels
