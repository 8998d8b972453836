// Row reductions over x (rows, n), contiguous: the autograd op first moves the reduced dims to
// the end. Sums accumulate in double for float input (PyTorch's results are as accurate).
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* y);  // y (rows)
// Max and its first index per row; NaN wins, as in PyTorch.
template <typename T>
void max_rows(const T* x, int64_t rows, int64_t n, T* y, int64_t* index);
// Mean and variance with divisor (n - correction): correction 1 is PyTorch's unbiased default.
template <typename T>
void moments_rows(const T* x, int64_t rows, int64_t n, int64_t correction, T* mean, T* var);
// dx += dvar * 2 (x - mean) / (n - correction), per row.
template <typename T>
void moments_backward(const T* x, const T* mean, const T* dvar, int64_t rows, int64_t n, int64_t correction, T* dx);

}  // namespace vit::kernels

namespace vit::kernels {
// dx (rows, n) [r, index[r]] += dy[r]: the backward of max_rows.
template <typename T>
void scatter_rows_add(const T* dy, const int64_t* index, int64_t rows, int64_t n, T* dx);
}  // namespace vit::kernels
