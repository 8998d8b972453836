// The inference path's Linear layer as one fused kernel:
//   C (M, N) = epilogue(A (M, K) @ W^T + bias),  W (N, K) row-major as nn::Linear stores it.
// W is read in place (it may be memory-mapped: no repacked copy of the weights exists, so a
// loaded model costs its file size in memory and nothing more). Instead the activations are
// packed per call into panels of 16 rows, k-major (16 contiguous floats per k), which is cheap:
// A is M x K, W is N x K and N >= K in every ViT layer but the head. The AVX2 micro-kernel
// broadcasts six weights (six output features) against one 16-row panel: 6 x 16 accumulators
// in twelve registers, two FMAs per weight element. Threads split output features, so each
// weight row is streamed from memory once per call.
// The epilogue is fused into the store: bias, bias + exact GELU, or accumulation into C
// (residual connections: C += A W^T + bias).
// Needs AVX2 + FMA; linear_supported() is false elsewhere and callers use kernels::gemm.
#pragma once

#include <cstdint>

namespace vit::kernels {

enum class Epilogue {
  Store,       // C = A W^T + bias
  Accumulate,  // C += A W^T + bias
  Gelu,        // C = gelu(A W^T + bias), exact (erf) GELU
};

bool linear_supported();

// bias may be null; lda / ldc are row strides in elements; A and C must not overlap.
void linear_forward(const float* A, int64_t M, int64_t K, int64_t lda, const float* W, int64_t N,
                    const float* bias, float* C, int64_t ldc, Epilogue epilogue);

}  // namespace vit::kernels
