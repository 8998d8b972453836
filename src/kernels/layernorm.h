// LayerNorm over the last n elements of each row of x (rows, n) (several trailing dims are
// flattened into n by the caller). Population variance, y = (x - mean) * rstd * w + b.
// Forward saves mean and rstd (rows); backward accumulates dx, dw, db (w/b may be null).
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
void layernorm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                       double eps);
template <typename T>
void layernorm_backward(const T* x, const T* weight, const T* mean, const T* rstd, const T* dy, T* dx, T* dweight,
                        T* dbias, int64_t rows, int64_t n);

// References: the textbook formulas in double, one row at a time, no threads.
// y (rows, n) from x (rows, n), weight / bias (n) or null.
template <typename T>
void layernorm_forward_ref(const T* x, const T* weight, const T* bias, T* y, int64_t rows, int64_t n, double eps);
// dx (rows, n), dweight (n), dbias (n) += the gradients of sum(dy * y), each of them null when not
// wanted. The same arguments as layernorm_backward, except that mean and rstd are recomputed in
// double from x (hence eps) rather than read from the forward's saved statistics.
template <typename T>
void layernorm_backward_ref(const T* x, const T* weight, const T* dy, T* dx, T* dweight, T* dbias, int64_t rows,
                            int64_t n, double eps);

}  // namespace vit::kernels
