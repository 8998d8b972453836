// bfloat16 Linear layers for inference (`--precision bf16`): weights converted once to bf16 and
// packed in pairs along K, activations rounded to bf16 as they are packed, products accumulated in
// float32 (AVX512_BF16's vdpbf16ps: two bf16 products a lane per instruction, 2x the float32 FMA
// rate), then the one epilogue (bias, GELU, residual) in float32. The rest of the network
// (LayerNorm, softmax, attention, the residual stream) stays float32, as OpenVINO and PyTorch's CPU
// autocast do.
//   y (M, N) = epilogue(bf16(x) (M, K) @ bf16(W)^T (K, N) + bias)
// Conversion rounds to nearest, ties to even (the hardware's rule); NaN stays NaN.
// Paths: AVX512_BF16 (8 x 48 tiles over three 16-column panels) where the CPU has it and the ISA
// cap allows Avx512; else, with AVX2, the float32 GEMM's micro-kernel on the same bf16 values (x
// rounded to bf16 and kept as float32, the weight's panels widened as the driver reaches them:
// float32 speed, half the weight memory); else a plain C++ path with the same bf16 inputs and
// float32 accumulation (correct everywhere, much slower). `bf16_gemm_path()` says which runs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm/epilogue.h"

namespace vit::kernels {

// float32 -> bfloat16 bits (round to nearest even; NaN kept a quiet NaN) and back.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
// The first of n values that is finite but rounds to bfloat16 infinity (|x| >= 3.3962e38, past
// bfloat16's largest finite 3.3895e38 by half a step), or -1 when none does.
int64_t bf16_overflow_index(const float* values, int64_t n);

// W (N, K) row-major as bf16 pairs: panel p holds columns [16p, 16p + 16) as
// [ceil(K / 2)][16][2] bf16 (zero-padded past K and N).
class Bf16Matrix {
 public:
  static Bf16Matrix from_weight(const float* weight, int64_t N, int64_t K);
  int64_t rows() const { return n_; }  // N (output features)
  int64_t cols() const { return k_; }  // K (input features)
  int64_t panels() const { return (n_ + 15) / 16; }
  int64_t pairs() const { return (k_ + 1) / 2; }
  const uint32_t* panel(int64_t p) const { return data_.data() + p * pairs() * 16; }
  // The bf16 value of W[n][k], as a float (for references and tests).
  float at(int64_t n, int64_t k) const;

 private:
  int64_t n_ = 0, k_ = 0;
  std::vector<uint32_t> data_;  // two bf16 per element: the lower half has the even k
};

// True when this process runs the AVX512_BF16 path.
bool bf16_gemm_native();
// The path that runs: "AVX512_BF16"; "AVX2 float32" (no bfloat16 instructions: the float32 GEMM on
// the bfloat16 values, about float32's speed); or "plain C++" (below AVX2: much slower).
const char* bf16_gemm_path();

// y (M, N) with row stride ldy = epilogue(bf16(x) (M, K; row stride lda) @ W^T + bias).
void linear_bf16(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& weight, const float* bias,
                 float* y, int64_t ldy, const Epilogue& epilogue);

// The reference: the same bf16 inputs, products summed in double, the epilogue in double.
void linear_bf16_ref(const float* x, int64_t M, int64_t K, int64_t lda, const Bf16Matrix& weight, const float* bias,
                     float* y, int64_t ldy, const Epilogue& epilogue);

}  // namespace vit::kernels
