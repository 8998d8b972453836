// Gradient-free tensor arithmetic used inside backward closures (internal to autograd): thin
// calls into the kernels on whole Tensors, so closures stay one screen long.
#pragma once

#include <type_traits>

#include "autograd/ops.h"
#include "core/tensor.h"
#include "kernels/activation.h"
#include "kernels/binary.h"
#include "kernels/gemm/bf16_train_gemm.h"
#include "kernels/gemm/gemm.h"

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
// Appends an optional input (a weight or bias that may be undefined) to an op's inputs: its
// index there (where backward finds its gradient), or -1 when it is undefined and not added.
inline int push_optional_input(std::vector<Variable>& inputs, const Variable& v) {
  if (!v.defined()) return -1;
  inputs.push_back(v);
  return static_cast<int>(inputs.size()) - 1;
}
// Refuses MatmulPrecision::BF16 for a tensor that is not float32: "[op] bf16 matmul precision
// takes float32 tensors, got float64".
void check_precision(MatmulPrecision precision, const Tensor& x, const char* op);

// kernels::gemm, or with MatmulPrecision::BF16 kernels::gemm_bf16 (float only: check_precision
// first): the GEMMs of linear's and conv2d's forward and backward.
template <typename T>
void gemm(MatmulPrecision precision, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (precision == MatmulPrecision::BF16) {
      kernels::gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    }
  }
  kernels::gemm<T>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace vit::detail
