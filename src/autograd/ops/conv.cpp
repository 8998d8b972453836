// conv2d (torch.nn.functional.conv2d, groups = dilation = 1) as im2row + one GEMM. The GEMM
// produces channels-last (B, OH, OW, OC); the result is that memory viewed as (B, OC, OH, OW),
// so a patch embedding's flatten(2).transpose(1, 2) is (B, N, D) with no copy at all. With
// MatmulPrecision::BF16 the GEMMs (forward, drows, dW) take bfloat16 operands (ops.h).
// conv2d_channels_last in float32 is the direct convolution (kernels/conv/direct_conv.h): 2-4x the
// im2row + GEMM path on the hybrid's 3x3 convolutions; double and bfloat16 keep im2row + GEMM.
#include "autograd/ops.h"
#include "autograd/tensor_math.h"
#include "kernels/binary.h"
#include "kernels/conv/direct_conv.h"
#include "kernels/gemm/gemm.h"
#include "kernels/im2row.h"

namespace vit {

namespace {

// The checks both layouts make, in op's words; the shape of the convolution. channels_last: x is
// (B, H, W, C), else (B, C, H, W).
kernels::ConvShape checked_conv_shape(const char* op, const Variable& x, const Variable& weight, const Variable& bias,
                                      int64_t stride, int64_t padding, MatmulPrecision precision, bool channels_last) {
  VIT_CHECK(x.defined() && weight.defined(), op, "undefined input or weight");
  VIT_CHECK(x.dim() == 4, op, "input must be {}, got {}", channels_last ? "(B, H, W, C)" : "(B, C, H, W)",
            shape_str(x.shape()));
  VIT_CHECK(weight.dim() == 4, op, "weight must be (OC, C, KH, KW), got {}", shape_str(weight.shape()));
  const int64_t channels = x.size(channels_last ? 3 : 1);
  VIT_CHECK(channels == weight.size(1), op, "input {} has {} channels but weight {} expects {}", shape_str(x.shape()),
            channels, shape_str(weight.shape()), weight.size(1));
  VIT_CHECK(stride >= 1 && padding >= 0, op, "stride {} must be >= 1 and padding {} >= 0", stride, padding);
  detail::check_same_dtype(x.data(), weight.data(), op);
  detail::check_precision(precision, x.data(), op);
  const int64_t height = x.size(channels_last ? 1 : 2), width = x.size(channels_last ? 2 : 3);
  const kernels::ConvShape s{x.size(0), channels, height, width, weight.size(2), weight.size(3), stride, padding};
  VIT_CHECK(s.height + 2 * padding >= s.kernel_h && s.width + 2 * padding >= s.kernel_w, op,
            "kernel {}x{} larger than padded input {}x{} (input {})", s.kernel_h, s.kernel_w, s.height + 2 * padding,
            s.width + 2 * padding, shape_str(x.shape()));
  if (bias.defined()) {
    VIT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, "bias {} != ({},)", shape_str(bias.shape()),
              weight.size(0));
    detail::check_same_dtype(x.data(), bias.data(), op);
  }
  return s;
}

}  // namespace

namespace detail {
Variable conv2d_direct(const Variable& x, const Variable& weight, const Variable& bias, const kernels::ConvShape& s);
}  // namespace detail

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride, int64_t padding,
                MatmulPrecision precision) {
  const kernels::ConvShape s = checked_conv_shape("conv2d", x, weight, bias, stride, padding, precision, false);
  const int64_t OC = weight.size(0), OH = s.out_h(), OW = s.out_w(), L = s.row_length();
  const int64_t positions = s.batch * OH * OW;
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.data().contiguous();  // (OC, L)
  Tensor rows = Tensor::empty({positions, L}, x.dtype());
  Tensor out = Tensor::empty({s.batch, OH, OW, OC}, x.dtype());  // channels-last
  dispatch(x.dtype(), [&]<typename T>() {
    kernels::im2row<T>(s, xc.data<T>(), rows.data<T>());
    detail::gemm<T>(precision, false, true, positions, OC, L, T(1), rows.data<T>(), L, w.data<T>(), L, T(0),
                    out.data<T>(), OC);
    if (bias.defined()) kernels::bias_add_forward<T>(out.data<T>(), bias.data().contiguous().data<T>(), positions, OC);
  });
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result(out.permute({0, 3, 1, 2}), "conv2d", inputs, {x.requires_grad() ? w : Tensor()},
                     [s, rows, w, OC, L, positions, precision](const Tensor& g, std::vector<Tensor>& grads) {
                       const Tensor gl = g.permute({0, 2, 3, 1}).contiguous();  // (positions, OC)
                       dispatch(g.dtype(), [&]<typename T>() {
                         if (grads[0].defined()) {  // drows (positions, L) = g @ W, then scatter back
                           Tensor drows = Tensor::empty({positions, L}, g.dtype());
                           detail::gemm<T>(precision, false, false, positions, L, OC, T(1), gl.data<T>(), OC,
                                           w.data<T>(), L, T(0), drows.data<T>(), L);
                           kernels::row2im<T>(s, drows.data<T>(), grads[0].data<T>());
                         }
                         if (grads[1].defined())  // dW (OC, L) += g^T @ rows
                           detail::gemm<T>(precision, true, false, OC, L, positions, T(1), gl.data<T>(), OC,
                                           rows.data<T>(), L, T(1), grads[1].data<T>(), L);
                         if (grads.size() > 2 && grads[2].defined())
                           kernels::bias_add_backward<T>(gl.data<T>(), grads[2].data<T>(), positions, OC);
                       });
                     });
}

Variable conv2d_channels_last(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride,
                              int64_t padding, MatmulPrecision precision) {
  const char* op = "conv2d_channels_last";
  const kernels::ConvShape s = checked_conv_shape(op, x, weight, bias, stride, padding, precision, true);
  // float32: the direct convolution (kernels/conv/direct_conv.h), no im2row in either direction.
  if (x.dtype() == DType::F32 && precision == MatmulPrecision::F32) return detail::conv2d_direct(x, weight, bias, s);
  const int64_t OC = weight.size(0), OH = s.out_h(), OW = s.out_w(), L = s.row_length();
  const int64_t positions = s.batch * OH * OW;
  // A 1x1 convolution of stride 1 reads the map's rows themselves: no im2row.
  const bool pointwise = s.kernel_h == 1 && s.kernel_w == 1 && stride == 1 && padding == 0;
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.data().permute({0, 2, 3, 1}).contiguous();  // (OC, KH, KW, C) = (OC, L)
  const Tensor rows = pointwise ? xc : Tensor::empty({positions, L}, x.dtype());
  Tensor out = Tensor::empty({s.batch, OH, OW, OC}, x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    if (!pointwise) kernels::im2row_nhwc<T>(s, xc.data<T>(), rows.data<T>());
    detail::gemm<T>(precision, false, true, positions, OC, L, T(1), rows.data<T>(), L, w.data<T>(), L, T(0),
                    out.data<T>(), OC);
    if (bias.defined()) kernels::bias_add_forward<T>(out.data<T>(), bias.data().contiguous().data<T>(), positions, OC);
  });
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result(
      out, op, inputs, {xc, x.requires_grad() ? w : Tensor()},
      [s, rows, w, OC, L, positions, precision, pointwise](const Tensor& g, std::vector<Tensor>& grads) {
        const Tensor gl = g.contiguous();  // (positions, OC)
        dispatch(g.dtype(), [&]<typename T>() {
          if (grads[0].defined()) {  // drows (positions, L) = g @ W, then scattered back
            if (pointwise) {         // straight into dx (B, H, W, C): the rows are x's own
              detail::gemm<T>(precision, false, false, positions, L, OC, T(1), gl.data<T>(), OC, w.data<T>(), L, T(1),
                              grads[0].data<T>(), L);
            } else {
              Tensor drows = Tensor::empty({positions, L}, g.dtype());
              detail::gemm<T>(precision, false, false, positions, L, OC, T(1), gl.data<T>(), OC, w.data<T>(), L, T(0),
                              drows.data<T>(), L);
              kernels::row2im_nhwc<T>(s, drows.data<T>(), grads[0].data<T>());
            }
          }
          if (grads[1].defined()) {  // dW (OC, KH, KW, C) = g^T @ rows, into the (OC, C, KH, KW) gradient
            Tensor dw = Tensor::empty({OC, L}, g.dtype());
            detail::gemm<T>(precision, true, false, OC, L, positions, T(1), gl.data<T>(), OC, rows.data<T>(), L, T(0),
                            dw.data<T>(), L);
            accumulate_into(grads[1], dw.view({OC, s.kernel_h, s.kernel_w, s.channels}).permute({0, 3, 1, 2}));
          }
          if (grads.size() > 2 && grads[2].defined())
            kernels::bias_add_backward<T>(gl.data<T>(), grads[2].data<T>(), positions, OC);
        });
      });
}

namespace detail {

Variable conv2d_direct(const Variable& x, const Variable& weight, const Variable& bias, const kernels::ConvShape& s) {
  const int64_t OC = weight.size(0), positions = s.batch * s.out_h() * s.out_w();
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.data().permute({0, 2, 3, 1}).contiguous();  // (OC, KH, KW, C)
  const Tensor b = bias.defined() ? bias.data().contiguous() : Tensor();
  Tensor out = Tensor::empty({s.batch, s.out_h(), s.out_w(), OC}, x.dtype());
  kernels::ConvEpilogue e;
  e.bias = b.defined() ? b.data<float>() : nullptr;
  kernels::conv_nhwc_forward(s, OC, xc.data<float>(), w.data<float>(), out.data<float>(), e);
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result(
      out, "conv2d_channels_last", inputs, {xc, w},
      [s, xc, w, OC, positions](const Tensor& g, std::vector<Tensor>& grads) {
        const Tensor gl = g.contiguous();  // (positions, OC)
        if (grads[0].defined())
          kernels::conv_nhwc_backward_input(s, OC, gl.data<float>(), w.data<float>(), grads[0].data<float>(), true);
        if (grads[1].defined()) {  // (OC, KH, KW, C), into the (OC, C, KH, KW) gradient
          Tensor dw = Tensor::empty({OC, s.kernel_h, s.kernel_w, s.channels}, g.dtype());
          kernels::conv_nhwc_backward_weight(s, OC, xc.data<float>(), gl.data<float>(), dw.data<float>());
          accumulate_into(grads[1], dw.permute({0, 3, 1, 2}));
        }
        if (grads.size() > 2 && grads[2].defined())
          kernels::bias_add_backward<float>(gl.data<float>(), grads[2].data<float>(), positions, OC);
      });
}

}  // namespace detail

}  // namespace vit
