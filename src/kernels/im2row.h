// Convolution as GEMM, channels-last: im2row turns x (B, C, H, W) into rows (B*OH*OW, C*KH*KW),
// one row per output position holding its receptive field in (c, kh, kw) order, so that
// rows @ weight(OC, C*KH*KW)^T = (B, OH*OW, OC) — for patch embedding (kernel == stride) that
// is already the (B, N, D) token layout. row2im is its adjoint and accumulates (+=).
#pragma once

#include <cstdint>

namespace vit::kernels {

struct ConvShape {
  int64_t batch, channels, height, width;  // input (B, C, H, W)
  int64_t kernel_h, kernel_w, stride, padding;
  int64_t out_h() const { return (height + 2 * padding - kernel_h) / stride + 1; }
  int64_t out_w() const { return (width + 2 * padding - kernel_w) / stride + 1; }
  int64_t row_length() const { return channels * kernel_h * kernel_w; }
};

template <typename T>
void im2row(const ConvShape& s, const T* x, T* rows);
template <typename T>
void row2im(const ConvShape& s, const T* rows, T* dx);
// Channels-last: x (B, H, W, C) -> rows (B*OH*OW, KH*KW*C), each row in (kh, kw, c) order, so
// that its weight is the (OC, C, KH, KW) one permuted to (OC, KH, KW, C). Zero padding.
template <typename T>
void im2row_nhwc(const ConvShape& s, const T* x, T* rows);
// Its adjoint: dx (B, H, W, C) += each row's (kh, kw, c) values at their input positions.
template <typename T>
void row2im_nhwc(const ConvShape& s, const T* rows, T* dx);

}  // namespace vit::kernels
