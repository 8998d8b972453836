// Int8 linear layers for inference (`vit quantize`, kernels for the inference session):
//   C (M, N) = epilogue(dequant(quant(A) (M, K) @ Wq^T) + bias)
//
// The schemes (tools/golden/quantize_reference.py implements the same, and golden tests hold the two
// bit-exact in their integer parts):
//  - Weights, once, per output channel, symmetric, 8 bits (scheme vit-int8-2, Q = 127) or 7 bits
//    (vit-int8-1, Q = 63): scale[n] = max_k |W[n,k]| / Q (float32),
//    q[n,k] = clamp(round_half_even(W[n,k] / scale[n]), -Q, Q); a row of zeros gets scale 1.
//  - Activations, at every call, per row (token), asymmetric, 8 bits (uint8): mn = min(0, min_k x),
//    mx = max(0, max_k x), s = (mx - mn) / 255 (float32; s = 1 when s < FLT_MIN, i.e. the row is
//    all zeros), inv = 1 / s, zero point z = clamp(round_half_even(-mn * inv), 0, 255),
//    q[k] = clamp(round_half_even(x[k] * inv) + z, 0, 255). A row holding NaN or Inf gets s = NaN
//    and z = 0, so its outputs are NaN (never a silent number).
//  - Products: int32 acc = sum_k qa[k] qw[n,k] - z * sum_k qw[n,k] (exact: the zero point's
//    compensation uses the weights' column sums, computed at packing), then
//    y = float(acc) * (s * scale[n]) + bias[n], GELU or the residual addition fused in the store.
//
// Why a 7-bit scheme existed: AVX2 has no 8-bit dot product with 32-bit accumulation (that is
// VNNI). Its vpmaddubsw multiplies uint8 by int8 and adds adjacent pairs into int16 *with
// saturation*: 255 x 127 twice is 64770 > 32767. With |q| <= 63 the pair stays <= 32130, exact
// (ONNX Runtime's reduce_range makes the same trade). The 8-bit scheme (the default of
// `vit quantize` since issue 30) halves the weights' rounding error; VNNI's vpdpbusd takes it as
// is, and on AVX2 the kernel shifts the activations to signed bytes instead (pairs <= 32512,
// exact: int8_micro_kernels.h). Both schemes give the same integers on every path. Activations
// keep all 8 bits: in ViTs they, not the weights, carry the outliers. -128 is never a weight.
//
// Layout and loops: W is packed into panels of 16 output channels; within a panel, for each
// group of 4 k, 16 x 4 bytes (channel-major), i.e. one zmm (two ymm) of 16 channels x 4 k. A is
// quantized row by row into micro-panels of mr rows (the micro-kernel's) with the same 4-k
// grouping, once per call (in parallel), then the micro-kernel (int8_micro_kernels.h: AVX-512
// VNNI 8 x 48, AVX2 4 x 16) runs over the tiles. Threads split the weight panels (or the rows
// when there are few panels): kernels/gemm/gemm_driver.h, the float32 GEMM's skeleton. The
// micro-kernel comes from a table by ISA (kernels/cpu_features.h) and weight range; below AVX2 (or
// with the ISA capped to Isa::Scalar, as the tests force it) a plain C++ path computes the same
// integers. The store is
// the GEMM epilogue (kernels/gemm/epilogue.h) after dequantisation: here alpha is 1 and beta 0 or 1
// (the residual, then without activation), added as C += (dequantised + bias).
#pragma once

#include <cstdint>

#include "kernels/aligned.h"
#include "kernels/gemm/epilogue.h"

namespace vit::kernels {

inline constexpr int32_t kInt8WeightMax = 63;    // 7-bit weights lie in [-63, 63]
inline constexpr int32_t kInt8WeightMax8 = 127;  // 8-bit weights in [-127, 127]

// The range of `bits`-bit weights (7: 63, 8: 127); throws for any other count.
int32_t int8_weight_max(int bits);

// Quantizes W (N, K) per row (output channel) into q (N, K) and scale (N) by the scheme above.
// Returns -1, or the flat index of the first NaN/Inf in W (then q and scale are unspecified).
int64_t quantize_weight(const float* W, int64_t N, int64_t K, int8_t* q, float* scale, int bits = 7);

struct RowQuantization {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
// One activation row by the scheme above (the plain definition; the fast path is bit-identical).
RowQuantization quantize_row(const float* x, int64_t K, uint8_t* q);

// A quantized weight W (N, K) packed for the kernel (64-byte aligned), with its scales and the
// column sums the zero point's compensation needs.
class Int8Matrix {
 public:
  Int8Matrix() = default;
  // q (N, K) `bits`-bit, i.e. in [-63, 63] or [-127, 127] (checked: throws naming the first value
  // outside), scale (N) finite > 0.
  static Int8Matrix from_quantized(const int8_t* q, const float* scale, int64_t N, int64_t K, int bits = 7);

  int64_t rows() const { return k_; }    // K
  int64_t cols() const { return n_; }    // N
  int64_t depth() const { return kp_; }  // K rounded up to a multiple of 4
  int64_t panels() const { return (n_ + 15) / 16; }
  int32_t weight_max() const { return weight_max_; }    // the largest |q| (the AVX2 kernel's choice)
  const int8_t* data() const { return data_.get(); }    // panels() x depth() x 16 bytes
  const float* scales() const { return scale_.get(); }  // panels() x 16 (0 past N)
  const int32_t* column_sums() const { return colsum_.get(); }
  int8_t at(int64_t n, int64_t k) const;  // q[n, k]
  size_t bytes() const;

 private:
  int64_t k_ = 0, n_ = 0, kp_ = 0;
  int32_t weight_max_ = 0;
  AlignedArray<int8_t> data_;
  AlignedArray<float> scale_;
  AlignedArray<int32_t> colsum_;
};

// C (M, N) = epilogue(...) as above; bias may be null; lda / ldc are row strides; A and C must
// not overlap. Runs on the calling thread when called inside a parallel region.
void linear_int8(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, const float* bias, float* C,
                 int64_t ldc, const Epilogue& epilogue);

// The integer part alone (tests and the golden check): acc (M, N) = sum_k qa[m,k] qw[n,k], before
// the zero point's compensation, and each row's quantization.
void int8_accumulators(const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, int32_t* acc,
                       RowQuantization* rows);

}  // namespace vit::kernels
