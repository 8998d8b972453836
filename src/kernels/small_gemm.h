// The float32 GEMM for small operands, as attention uses per (image, head): a few dozen to a few
// hundred rows and columns, K of a head dim or a token count. Same contract as gemm<float>
// (kernels/gemm.h): C (M, N) = alpha * op(A) @ op(B) + beta * C, beta 0 ignoring NaN in C.
// BLAS spends more on its set-up per call (interface, beta pass, two packing copies) than on the
// arithmetic at these sizes; this kernel copies only B, into one zero-padded k-major buffer of the
// calling thread (transposing it when trans_b), and runs a 6 x 16 register tile straight from A.
// Single-threaded: callers run it inside their own parallel loops. Without AVX2 + FMA it calls
// gemm<float>.
#pragma once

#include <cstdint>

namespace vit::kernels {

void small_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace vit::kernels
