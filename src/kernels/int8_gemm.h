// Int8 linear layers for inference (`vit quantize`, kernels for the inference session):
//   C (M, N) = epilogue(dequant(quant(A) (M, K) @ Wq^T) + bias)
//
// The scheme (tools/quantize_reference.py implements the same, and a golden test holds the two
// bit-exact in their integer parts):
//  - Weights, once, per output channel, symmetric, 7 bits: scale[n] = max_k |W[n,k]| / 63
//    (float32), q[n,k] = clamp(round_half_even(W[n,k] / scale[n]), -63, 63); a row of zeros gets
//    scale 1.
//  - Activations, at every call, per row (token), asymmetric, 8 bits (uint8): mn = min(0, min_k x),
//    mx = max(0, max_k x), s = (mx - mn) / 255 (float32; s = 1 when s < FLT_MIN, i.e. the row is
//    all zeros), inv = 1 / s, zero point z = clamp(round_half_even(-mn * inv), 0, 255),
//    q[k] = clamp(round_half_even(x[k] * inv) + z, 0, 255). A row holding NaN or Inf gets s = NaN
//    and z = 0, so its outputs are NaN (never a silent number).
//  - Products: int32 acc = sum_k qa[k] qw[n,k] - z * sum_k qw[n,k] (exact: the zero point's
//    compensation uses the weights' column sums, computed at packing), then
//    y = float(acc) * (s * scale[n]) + bias[n], GELU or the residual addition fused in the store.
//
// Why 7-bit weights: AVX2 has no 8-bit dot product with 32-bit accumulation (that is VNNI). Its
// vpmaddubsw multiplies uint8 by int8 and adds adjacent pairs into int16 *with saturation*: two
// 8-bit products can reach 2 x 255 x 127 = 64770 > 32767 and would be clipped silently. With
// |q| <= 63 the pair is at most 2 x 255 x 63 = 32130: never saturates, so the int16 step is
// exact (ONNX Runtime's reduce_range makes the same trade). Activations keep all 8 bits: in ViTs
// they, not the weights, carry the outliers. Weights in a file outside [-63, 63] are refused at
// load (they could saturate).
//
// Layout and loops: W is packed into panels of 16 output channels; within a panel, for each
// group of 4 k, 16 x 4 bytes (channel-major), i.e. two AVX2 registers of 8 channels x 4 k. A is
// quantized row by row into micro-panels of 4 rows with the same 4-k grouping, once per call (in
// parallel), then the 4 x 16 micro-kernel: per group, two loads of W, four 4-byte broadcasts of
// A, eight vpmaddubsw + vpmaddwd (pairs, then quads, into int32) + vpaddd; 8 accumulators.
// Threads split the weight panels (or the rows when there are few panels): kernels/gemm_driver.h,
// the float32 GEMM's skeleton. On CPUs with AVX-512 VNNI, vpdpbusd does a group of 4 k for 16
// channels in one instruction (three panels at a time: a 4 x 48 tile). The micro-kernel comes
// from a table by ISA (kernels/cpu_features.h); below AVX2 (or with the ISA capped to
// Isa::Scalar, as the tests force it) a plain C++ path computes the same integers. The store is
// the GEMM epilogue (kernels/epilogue.h) after dequantisation: here alpha is 1 and beta 0 or 1
// (the residual, then without activation), added as C += (dequantised + bias).
#pragma once

#include <cstdint>

#include "kernels/aligned.h"
#include "kernels/epilogue.h"

namespace vit::kernels {

inline constexpr int32_t kInt8WeightMax = 63;  // quantized weights lie in [-63, 63]

// Quantizes W (N, K) per row (output channel) into q (N, K) and scale (N) by the scheme above.
// Returns -1, or the flat index of the first NaN/Inf in W (then q and scale are unspecified).
int64_t quantize_weight(const float* W, int64_t N, int64_t K, int8_t* q, float* scale);

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
  // q (N, K) in [-63, 63] (checked: throws naming the first value outside), scale (N) finite > 0.
  static Int8Matrix from_quantized(const int8_t* q, const float* scale, int64_t N, int64_t K);

  int64_t rows() const { return k_; }    // K
  int64_t cols() const { return n_; }    // N
  int64_t depth() const { return kp_; }  // K rounded up to a multiple of 4
  int64_t panels() const { return (n_ + 15) / 16; }
  const int8_t* data() const { return data_.get(); }    // panels() x depth() x 16 bytes
  const float* scales() const { return scale_.get(); }  // panels() x 16 (0 past N)
  const int32_t* column_sums() const { return colsum_.get(); }
  int8_t at(int64_t n, int64_t k) const;  // q[n, k]
  size_t bytes() const;

 private:
  int64_t k_ = 0, n_ = 0, kp_ = 0;
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
