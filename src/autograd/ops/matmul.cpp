// matmul (PyTorch semantics, batch broadcasting) and bmm through kernels::gemm; linear's forward
// through kernels/linear.h (bias included), its backward through kernels::gemm; with
// MatmulPrecision::BF16, all three through the bf16 training GEMMs (kernels/gemm/bf16_train_gemm.h).
// Strided operands are passed to BLAS as (possibly transposed) matrices without copies when a
// unit stride exists; a broadcast operand's gradient accumulates over its batch copies.
#include "autograd/ops.h"
#include "autograd/tensor_math.h"
#include "core/strided.h"
#include "kernels/binary.h"
#include "kernels/gemm/gemm.h"
#include "kernels/linear.h"

namespace vit {
namespace {

// How to hand one (rows, cols) matrix of a strided tensor to BLAS.
struct MatrixArg {
  bool transposed = false;
  int64_t ld = 0;
};

// nullopt-like: returns false when neither dim has unit stride (caller copies).
bool blas_layout(const Tensor& t, MatrixArg& arg) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  if (cols == 1 || cs == 1) {
    arg = {false, rows == 1 ? std::max<int64_t>(cols, 1) : std::max<int64_t>(rs, std::max<int64_t>(cols, 1))};
    return rows == 1 || rs >= cols;
  }
  if (rows == 1 || rs == 1) {
    arg = {true, cols == 1 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(cs, std::max<int64_t>(rows, 1))};
    return cols == 1 || cs >= rows;
  }
  return false;
}

// C[i] (+)= A[i] @ B[i] for every batch index i; A (..., M, K), B (..., K, N), C (..., M, N)
// share the batch shape (any strides, stride 0 allowed). C's matrices must be row-major.
// Batches run sequentially, so stride-0 (broadcast) C matrices accumulate correctly.
void batched_gemm(Tensor A, Tensor B, const Tensor& C, bool accumulate) {
  MatrixArg a, b, c;
  if (!blas_layout(A, a)) A = A.contiguous(), blas_layout(A, a);
  if (!blas_layout(B, b)) B = B.contiguous(), blas_layout(B, b);
  VIT_ASSERT(blas_layout(C, c) && !c.transposed);
  const int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
  const Shape batch(C.shape().begin(), C.shape().end() - 2);
  const Strides sa(A.strides().begin(), A.strides().end() - 2), sb(B.strides().begin(), B.strides().end() - 2),
      sc(C.strides().begin(), C.strides().end() - 2);
  dispatch(C.dtype(), [&]<typename T>() {
    const T* pa = A.data<T>();
    const T* pb = B.data<T>();
    T* pc = C.data<T>();
    const T beta = accumulate ? T(1) : T(0);
    // Walk the batch dims with a trailing dummy dim of size 1 (for_each_row visits rows).
    Shape walk = batch;
    walk.push_back(1);
    Strides wa = sa, wb = sb, wc = sc;
    wa.push_back(0), wb.push_back(0), wc.push_back(0);
    for_each_row<3>(walk, {&wa, &wb, &wc},
                    [&](const std::array<int64_t, 3>& off, int64_t, const std::array<int64_t, 3>&) {
                      kernels::gemm<T>(a.transposed, b.transposed, M, N, K, T(1), pa + off[0], a.ld, pb + off[1], b.ld,
                                       beta, pc + off[2], c.ld);
                    });
  });
}

}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  VIT_CHECK(a.defined() && b.defined(), "matmul", "undefined operand");
  VIT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "both arguments need at least 1 dim, got {} and {}",
            shape_str(a.shape()), shape_str(b.shape()));
  detail::check_same_dtype(a.data(), b.data(), "matmul");
  if (a.dim() == 1 && b.dim() == 1) return matmul(a.unsqueeze(0), b.unsqueeze(-1)).reshape({});  // dot product
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(-1)).squeeze(-1);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  VIT_CHECK(b.size(-2) == K, "matmul", "shapes {} and {} cannot be multiplied ({} != {})", shape_str(a.shape()),
            shape_str(b.shape()), K, b.size(-2));
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  auto with = [&batch](int64_t r, int64_t c) {
    Shape s = batch;
    s.insert(s.end(), {r, c});
    return s;
  };
  const Shape a_shape = with(M, K), b_shape = with(K, N);
  const Tensor ae = a.data().expand(a_shape), be = b.data().expand(b_shape);
  Tensor y = Tensor::empty(with(M, N), a.dtype());
  batched_gemm(ae, be, y, false);
  const std::vector<Tensor> saved{b.requires_grad() ? ae : Tensor(), a.requires_grad() ? be : Tensor()};
  return make_result(y, "matmul", {a, b}, saved,
                     [ae, be, a_shape, b_shape](const Tensor& g, std::vector<Tensor>& grads) {
                       if (grads[0].defined()) batched_gemm(g, be.transpose(-1, -2), grads[0].expand(a_shape), true);
                       if (grads[1].defined()) batched_gemm(ae.transpose(-1, -2), g, grads[1].expand(b_shape), true);
                     });
}

Variable bmm(const Variable& a, const Variable& b) {
  VIT_CHECK(
      a.defined() && b.defined() && a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
      "bmm", "expected (B, M, K) and (B, K, N), got {} and {}", a.defined() ? shape_str(a.shape()) : "undefined",
      b.defined() ? shape_str(b.shape()) : "undefined");
  return matmul(a, b);
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias, MatmulPrecision precision) {
  VIT_CHECK(x.defined() && weight.defined(), "linear", "undefined input or weight");
  VIT_CHECK(weight.dim() == 2, "linear", "weight must be (out_features, in_features), got {}",
            shape_str(weight.shape()));
  const int64_t out = weight.size(0), in = weight.size(1);
  VIT_CHECK(x.dim() >= 1 && x.size(-1) == in, "linear", "input {}: last dim {} != in_features {}", shape_str(x.shape()),
            x.dim() >= 1 ? x.size(-1) : 0, in);
  detail::check_same_dtype(x.data(), weight.data(), "linear");
  detail::check_precision(precision, x.data(), "linear");
  if (bias.defined()) {
    VIT_CHECK(bias.dim() == 1 && bias.size(0) == out, "linear", "bias {} != (out_features,) = ({},)",
              shape_str(bias.shape()), out);
    detail::check_same_dtype(x.data(), bias.data(), "linear");
  }
  const Tensor xc = x.data().contiguous();  // (rows, in)
  const Tensor w = weight.data().contiguous();
  const int64_t rows = xc.numel() / std::max<int64_t>(in, 1);
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = Tensor::empty(out_shape, x.dtype());  // (rows, out)
  const Tensor b = bias.defined() ? bias.data().contiguous() : Tensor();
  dispatch(x.dtype(), [&]<typename T>() {  // y = x W^T + bias: the Linear kernel picks its path
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (precision == MatmulPrecision::BF16) {
        kernels::linear_forward_bf16(xc.data<T>(), rows, in, in, w.data<T>(), out, pb, y.data<T>(), out);
        return;
      }
    }
    kernels::linear_forward<T>(xc.data<T>(), rows, in, in, w.data<T>(), out, pb, y.data<T>(), out,
                               kernels::Epilogue::Store);
  });
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  auto backward = [xc, w, rows, in, out, precision](const Tensor& g, std::vector<Tensor>& grads) {
    dispatch(g.dtype(), [&]<typename T>() {
      // dx (rows, in) += g (rows, out) @ W (out, in)
      if (grads[0].defined())
        detail::gemm<T>(precision, false, false, rows, in, out, T(1), g.data<T>(), out, w.data<T>(), in, T(1),
                        grads[0].data<T>(), in);
      // dW (out, in) += g^T (out, rows) @ x (rows, in)
      if (grads[1].defined())
        detail::gemm<T>(precision, true, false, out, in, rows, T(1), g.data<T>(), out, xc.data<T>(), in, T(1),
                        grads[1].data<T>(), in);
      if (grads.size() > 2 && grads[2].defined())
        kernels::bias_add_backward<T>(g.data<T>(), grads[2].data<T>(), rows, out);
    });
  };
  // dW reads x and dx reads W (as torch saves them).
  return make_result(y, "linear", inputs, {weight.requires_grad() ? xc : Tensor(), x.requires_grad() ? w : Tensor()},
                     backward);
}

Variable Variable::matmul(const Variable& other) const { return vit::matmul(*this, other); }

}  // namespace vit
