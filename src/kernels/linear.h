// Linear forward, the one door for every caller (autograd's linear, the inference session):
//   C (M, N) = epilogue(A (M, K) @ W^T + bias),  W (N, K) row-major as nn::Linear stores it.
// The kernel picks its own path, as llm.c's matmul_forward does:
//  - float32 on a CPU with AVX2 + FMA: a fused micro-kernel. W is read in place (it may be
//    memory-mapped: no repacked copy of the weights exists, so a loaded model costs its file size
//    and nothing more). Instead the activations are packed per call into panels of 16 rows,
//    k-major (16 contiguous floats per k), which is cheap: A is M x K, W is N x K and N >= K in
//    every ViT layer but the head. The micro-kernel broadcasts six weights (six output features)
//    against one 16-row panel: 6 x 16 accumulators in twelve registers, two FMAs per weight
//    element. Threads split output features, so each weight row is streamed once per call. The
//    epilogue is fused into the store.
//  - otherwise (double, or a CPU without AVX2): BLAS (kernels/gemm.h) and the epilogue as a
//    second pass over C.
// Epilogues: bias, bias + GELU (exact or tanh form, kernels/vmath.h), or accumulation into C
// (residual connections: C += A W^T + bias).
#pragma once

#include <cstdint>

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

// The readable reference: a triple loop accumulating in double, then the epilogue.
template <typename T>
void linear_forward_ref(const T* A, int64_t M, int64_t K, int64_t lda, const T* W, int64_t N, const T* bias, T* C,
                        int64_t ldc, Epilogue epilogue);

}  // namespace vit::kernels
