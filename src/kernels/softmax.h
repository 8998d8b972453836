// Softmax and log-softmax over the last dim of x (rows, n), contiguous. Forward saves its
// output; backward reads it: softmax dx += y * (dy - sum(dy * y)); log-softmax
// dx += dy - exp(y) * sum(dy). A row of all -inf gives NaN, as in PyTorch.
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t n);
template <typename T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n);
template <typename T>
void log_softmax_forward(const T* x, T* y, int64_t rows, int64_t n);
template <typename T>
void log_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n);

// Readable references (double accumulation, one row at a time, no threads), x, y, dy, dx (rows, n).
// The backward references take the forward's input x, not its output, and recompute the
// probabilities in double; they accumulate dx += J^T dy through the explicit Jacobian J (n, n).
template <typename T>
void softmax_forward_ref(const T* x, T* y, int64_t rows, int64_t n);
template <typename T>
void softmax_backward_ref(const T* x, const T* dy, T* dx, int64_t rows, int64_t n);
template <typename T>
void log_softmax_forward_ref(const T* x, T* y, int64_t rows, int64_t n);
template <typename T>
void log_softmax_backward_ref(const T* x, const T* dy, T* dx, int64_t rows, int64_t n);

}  // namespace vit::kernels
