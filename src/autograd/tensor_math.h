// Gradient-free tensor arithmetic used inside backward closures (internal to autograd): thin
// calls into the kernels on whole Tensors, so closures stay one screen long.
#pragma once

#include "core/tensor.h"
#include "kernels/activation.h"
#include "kernels/binary.h"

namespace vit::detail {

// a op b with broadcasting -> new contiguous tensor.
Tensor binary(kernels::Binary op, const Tensor& a, const Tensor& b);
// f(x) -> new contiguous tensor.
Tensor unary(kernels::Unary op, const Tensor& x);
// a * x + b -> new contiguous tensor.
Tensor affine(const Tensor& x, double a, double b);
// dst (a gradient buffer) += src summed down to dst's shape (src's shape broadcasts from dst's).
void accumulate_reduced(const Tensor& dst, const Tensor& src);
// Checks two operands have the same float dtype.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

}  // namespace vit::detail
