// Elementwise binary arithmetic with broadcasting: y (shape, contiguous) = a op b, where a and
// b are read through strides already broadcast to `shape` (stride 0 on broadcast dims).
// Gradients are formed by the autograd op from these same forwards plus a sum-reduction.
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace vit::kernels {

enum class Binary { Add, Sub, Mul, Div };

const char* binary_name(Binary op);

template <typename T>
void binary_forward(Binary op, const Shape& shape, const T* a, const Strides& a_strides, const T* b,
                    const Strides& b_strides, T* y);

}  // namespace vit::kernels

namespace vit::kernels {
// y (rows, n) += bias (n) broadcast over rows; and its backward dbias (n) += column sums of dy.
template <typename T>
void bias_add_forward(T* y, const T* bias, int64_t rows, int64_t n);
template <typename T>
void bias_add_backward(const T* dy, T* dbias, int64_t rows, int64_t n);
}  // namespace vit::kernels
