// Float32 convolution of channels-last maps without im2row: the convolution as an indirect GEMM
// (XNNPACK's indirection, the row pointers made per tile instead of stored). A tile of output
// positions walks the kernel's taps; each tap's rows are the input pixels' C channels, read in place
// (NHWC keeps a pixel's channels contiguous), or one shared zero row where the tap falls in the
// padding; a tap whose rows are all padding is skipped. No (positions x taps x C) matrix is written
// or read: im2row wrote and the GEMM packed ~9x the map for a 3x3 kernel (~25% of the hybrid's
// training step, with the scatter back in the backward).
//   forward          y (B, OH, OW, OC) = x * w  [+ bias] [+ y's old values] [ReLU]: the inference
//                    session's folded BatchNorm, residual and activation are the store
//   backward input   dx (B, H, W, C) (+)= the same kernel over dy, each input position's rows being
//                    the output positions its taps reach (stride 2: one in four taps, the rest
//                    skipped or zero)
//   backward weight  dw (OC, KH, KW, C) = sum over output positions of dy x the tap's input pixel:
//                    per thread over its share of the positions, in L2-sized chunks, then summed
// w is (OC, KH, KW, C): PyTorch's (OC, C, KH, KW) permuted. The micro-kernels are picked per ISA
// (conv_micro.h: avx512 8x32, avx2 6x16, scalar); every path is testable by lowering VIT_ISA.
#pragma once

#include <cstdint>

#include "kernels/im2row.h"

namespace vit::kernels {

struct ConvEpilogue {
  const float* bias = nullptr;  // (OC), or none
  bool accumulate = false;      // add the output's old values (a residual) before the ReLU
  bool relu = false;
};

void conv_nhwc_forward(const ConvShape& s, int64_t out_channels, const float* x, const float* w, float* y,
                       const ConvEpilogue& epilogue = {});
// accumulate: dx += the gradient, else dx = it.
void conv_nhwc_backward_input(const ConvShape& s, int64_t out_channels, const float* dy, const float* w, float* dx,
                              bool accumulate);
// dw (OC, KH, KW, C) = the gradient (overwritten).
void conv_nhwc_backward_weight(const ConvShape& s, int64_t out_channels, const float* x, const float* dy, float* dw);

// The micro-kernels at the active ISA, for reports: "avx2 6x16".
const char* conv_kernel_name();

}  // namespace vit::kernels
