// layer_norm over trailing normalized_shape dims (torch.nn.functional.layer_norm).
#include "kernels/layernorm.h"

#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {

Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight, const Variable& bias,
                    double eps) {
  VIT_CHECK(x.defined(), "layer_norm", "undefined input");
  const auto k = static_cast<int64_t>(normalized_shape.size());
  VIT_CHECK(k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape, "layer_norm",
            "input {}: trailing dims do not match normalized_shape {}", shape_str(x.shape()),
            shape_str(normalized_shape));
  VIT_CHECK(eps >= 0, "layer_norm", "eps must be >= 0, got {}", eps);
  for (const Variable* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    VIT_CHECK(p->shape() == normalized_shape, "layer_norm", "{} {} != normalized_shape {}",
              p == &weight ? "weight" : "bias", shape_str(p->shape()), shape_str(normalized_shape));
    detail::check_same_dtype(x.data(), p->data(), "layer_norm");
  }
  const int64_t n = shape_numel(normalized_shape);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.defined() ? weight.data().contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.data().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype()), rstd = Tensor::empty({rows}, x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    kernels::layernorm_forward<T>(xc.data<T>(), w.defined() ? w.data<T>() : nullptr,
                                  b.defined() ? b.data<T>() : nullptr, y.data<T>(), mean.data<T>(), rstd.data<T>(),
                                  rows, n, eps);
  });
  std::vector<Variable> inputs{x};
  const int weight_at = detail::push_optional_input(inputs, weight);
  const int bias_at = detail::push_optional_input(inputs, bias);
  return make_result(
      y, "layer_norm", inputs, {xc, w},
      [xc, w, mean, rstd, rows, n, weight_at, bias_at](const Tensor& g, std::vector<Tensor>& grads) {
        dispatch(g.dtype(), [&]<typename T>() {
          auto ptr = [&](int at) { return at >= 0 && grads[at].defined() ? grads[at].data<T>() : nullptr; };
          kernels::layernorm_backward<T>(xc.data<T>(), w.defined() ? w.data<T>() : nullptr, mean.data<T>(),
                                         rstd.data<T>(), g.data<T>(), ptr(0), ptr(weight_at), ptr(bias_at), rows, n);
        });
      });
}

}  // namespace vit
