// sum, mean, var, std, max, argmax over one or several dims with keepdim (PyTorch semantics;
// var/std default to the unbiased estimator, unbiased=false divides by n). The reduced dims are
// permuted to the end so every kernel sees contiguous rows (rows, n).
#include "kernels/reduce.h"

#include <algorithm>

#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {
namespace {

struct ReducePlan {
  std::vector<int64_t> perm;  // kept dims then reduced dims
  Shape permuted_shape;       // x's shape permuted
  Shape out_shape;            // result shape (keepdim applied)
  Shape keep_shape;           // result shape with reduced dims kept as 1
  int64_t rows = 1, n = 1;
};

ReducePlan plan_reduce(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  const auto ndim = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(ndim, dims.empty());
  for (int64_t d : dims) {
    const int64_t at = normalize_dim(d, std::max<int64_t>(ndim, 1), op);
    VIT_CHECK(ndim == 0 || !reduced[at], op, "dim {} appears twice in the reduction dims", d);
    if (ndim > 0) reduced[at] = true;
  }
  ReducePlan p;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[d]) continue;
    p.perm.push_back(d);
    p.rows *= shape[d];
    p.out_shape.push_back(shape[d]);
  }
  for (int64_t d = 0; d < ndim; ++d) {
    p.keep_shape.push_back(reduced[d] ? 1 : shape[d]);
    if (!reduced[d]) continue;
    p.perm.push_back(d);
    p.n *= shape[d];
  }
  if (keepdim) p.out_shape = p.keep_shape;
  for (int64_t d : p.perm) p.permuted_shape.push_back(shape[d]);
  return p;
}

// x with the reduced dims moved last, contiguous: (rows, n) in memory.
Tensor rows_of(const Tensor& x, const ReducePlan& p) { return x.permute(p.perm).contiguous(); }

// grad buffer of x (contiguous, x's shape) += d (rows, n) laid out in permuted order.
void accumulate_rows(const Tensor& grad, const Tensor& d, const ReducePlan& p) {
  accumulate_into(grad.permute(p.perm), d.view(p.permuted_shape));
}

}  // namespace

Variable sum(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce(x.shape(), dims, keepdim, "sum");
  const Tensor xr = rows_of(x.data(), p);
  Tensor y = Tensor::empty(p.out_shape, x.dtype());
  dispatch(x.dtype(), [&]<typename T>() { kernels::sum_rows<T>(xr.data<T>(), p.rows, p.n, y.data<T>()); });
  return make_result(y, "sum", {x}, {}, [p](const Tensor& g, std::vector<Tensor>& grads) {
    accumulate_into(grads[0], g.view(p.keep_shape).expand(grads[0].shape()));
  });
}

Variable mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce(x.shape(), dims, keepdim, "mean");
  return mul(sum(x, dims, keepdim), 1.0 / static_cast<double>(p.n));
}

Variable var(const Variable& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  const ReducePlan p = plan_reduce(x.shape(), dims, keepdim, "var");
  const int64_t correction = unbiased ? 1 : 0;
  const Tensor xr = rows_of(x.data(), p);
  Tensor y = Tensor::empty(p.out_shape, x.dtype());
  Tensor row_mean = Tensor::empty({p.rows}, x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    kernels::moments_rows<T>(xr.data<T>(), p.rows, p.n, correction, row_mean.data<T>(), y.data<T>());
  });
  return make_result(y, "var", {x}, {xr}, [p, xr, row_mean, correction](const Tensor& g, std::vector<Tensor>& grads) {
    Tensor d = Tensor::zeros({p.rows, p.n}, g.dtype());
    dispatch(g.dtype(), [&]<typename T>() {
      kernels::moments_backward<T>(xr.data<T>(), row_mean.data<T>(), g.data<T>(), p.rows, p.n, correction, d.data<T>());
    });
    accumulate_rows(grads[0], d, p);
  });
}

Variable std(const Variable& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  return sqrt(var(x, dims, unbiased, keepdim));
}

MaxResult max(const Variable& x, int64_t dim, bool keepdim) {
  const ReducePlan p = plan_reduce(x.shape(), {dim}, keepdim, "max");
  VIT_CHECK(p.n > 0, "max", "cannot reduce over an empty dim (shape {})", shape_str(x.shape()));
  const Tensor xr = rows_of(x.data(), p);
  Tensor y = Tensor::empty(p.out_shape, x.dtype());
  Tensor index = Tensor::empty(p.out_shape, DType::I64);
  dispatch(x.dtype(),
           [&]<typename T>() { kernels::max_rows<T>(xr.data<T>(), p.rows, p.n, y.data<T>(), index.data<int64_t>()); });
  Variable values = make_result(y, "max", {x}, {}, [p, index](const Tensor& g, std::vector<Tensor>& grads) {
    Tensor d = Tensor::zeros({p.rows, p.n}, g.dtype());
    dispatch(g.dtype(), [&]<typename T>() {
      kernels::scatter_rows_add<T>(g.data<T>(), index.data<int64_t>(), p.rows, p.n, d.data<T>());
    });
    accumulate_rows(grads[0], d, p);
  });
  return {values, index};
}

Variable max(const Variable& x) {
  VIT_CHECK(x.numel() > 0, "max", "max of an empty tensor");
  return max(x.reshape({-1}), 0, false).values;
}

Tensor argmax(const Variable& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return max(x, dim, keepdim).indices;
}

Variable Variable::sum(const std::vector<int64_t>& dims, bool keepdim) const { return vit::sum(*this, dims, keepdim); }
Variable Variable::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return vit::mean(*this, dims, keepdim);
}
Variable Variable::var(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return vit::var(*this, dims, unbiased, keepdim);
}
Variable Variable::std(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return vit::std(*this, dims, unbiased, keepdim);
}
Variable Variable::max(int64_t dim, bool keepdim) const { return vit::max(*this, dim, keepdim).values; }
Tensor Variable::argmax(int64_t dim, bool keepdim) const { return vit::argmax(*this, dim, keepdim); }

}  // namespace vit
