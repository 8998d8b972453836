// compare (see autograd/compare.h): the operands broadcast to one shape, then the kernel.
#include "autograd/compare.h"

#include "autograd/tensor_math.h"

namespace vit {

Tensor compare(kernels::Compare op, const Tensor& a, const Tensor& b) {
  const char* name = kernels::compare_name(op);
  VIT_CHECK(a.defined() && b.defined(), name, "undefined operand");
  detail::check_same_dtype(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const Tensor ac = a.expand(shape).contiguous(), bc = b.expand(shape).contiguous();
  Tensor y = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(),
           [&]<typename T>() { kernels::compare_forward<T>(op, ac.data<T>(), bc.data<T>(), y.data<T>(), y.numel()); });
  return y;
}

}  // namespace vit
