// Comparisons of tensors with broadcasting (torch.eq, ne, lt, le, gt, ge): a new tensor of the
// broadcast shape holding 1 where the comparison holds and 0 where not, in the operands' dtype
// (float32 or float64: vit has no bool dtype). No gradient: a comparison is a constant.
#pragma once

#include "core/tensor.h"
#include "kernels/compare.h"

namespace vit {

Tensor compare(kernels::Compare op, const Tensor& a, const Tensor& b);

}  // namespace vit
