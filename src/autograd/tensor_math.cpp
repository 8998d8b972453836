// Gradient-free tensor arithmetic for backward closures (see tensor_math.h).
#include "autograd/tensor_math.h"

namespace vit::detail {

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  VIT_CHECK(a.dtype() == b.dtype(), op, "dtype mismatch: {} {} vs {} {}", dtype_name(a.dtype()), shape_str(a.shape()),
            dtype_name(b.dtype()), shape_str(b.shape()));
}

void check_precision(MatmulPrecision precision, const Tensor& x, const char* op) {
  VIT_CHECK(precision == MatmulPrecision::F32 || x.dtype() == DType::F32, op,
            "bf16 matmul precision takes float32 tensors, got {} {}", dtype_name(x.dtype()), shape_str(x.shape()));
}

Tensor binary(kernels::Binary op, const Tensor& a, const Tensor& b) {
  check_same_dtype(a, b, kernels::binary_name(op));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), kernels::binary_name(op));
  const Tensor ae = a.expand(shape), be = b.expand(shape);
  Tensor y = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&]<typename T>() {
    kernels::binary_forward<T>(op, shape, ae.data<T>(), ae.strides(), be.data<T>(), be.strides(), y.data<T>());
  });
  return y;
}

Tensor unary(kernels::Unary op, const Tensor& x) {
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>() { kernels::unary_forward<T>(op, xc.data<T>(), y.data<T>(), x.numel()); });
  return y;
}

Tensor affine(const Tensor& x, double a, double b) {
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>() { kernels::affine_forward<T>(xc.data<T>(), a, b, y.data<T>(), x.numel()); });
  return y;
}

void accumulate_reduced(const Tensor& dst, const Tensor& src) {
  if (dst.shape() == src.shape()) {
    accumulate_into(dst, src);
    return;
  }
  // A stride-0 expanded view of dst sums every broadcast copy of src onto its source element.
  accumulate_into(dst.expand(src.shape()), src);
}

}  // namespace vit::detail
