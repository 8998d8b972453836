// The float32 GEMM for small operands, as attention uses per (image, head): a few dozen to a few
// hundred rows and columns, K of a head dim or a token count. Same contract as gemm<float>
// (kernels/gemm/gemm.h): C (M, N) = alpha * op(A) @ op(B) + beta * C, beta 0 ignoring NaN in C, alpha 0
// reading neither A nor B. BLAS spends more on its set-up per call (interface, beta pass, two
// packing copies) than on the arithmetic at these sizes; this kernel runs a register tile
// straight from A and from B's k-major rows, picked by the active ISA at each call:
//   AVX-512  8 x 32, the last 16-column vector masked: B read in place (no padding needed), or,
//            when trans_b, transposed once into a buffer of the calling thread in 16 x 16
//            register blocks;
//   AVX2     6 x 16: B in place when N is a multiple of 16 and not transposed, else one
//            zero-padded copy;
//   neither  gemm<float>.
// Single-threaded: callers run it inside their own parallel loops.
#pragma once

#include <cstdint>

namespace vit::kernels {

void small_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// dst[k * ldd + j] = src[j * lds + k] for j < rows, k < cols (both <= 16), in zmm registers;
// dst's rows k < cols are written whole (16 floats, zeros past `rows`). Only where
// isa_enabled(Isa::Avx512).
void transpose16_avx512(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd);

}  // namespace vit::kernels
