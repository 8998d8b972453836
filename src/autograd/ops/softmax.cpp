// softmax and log_softmax over any dim. The kernels work on the last dim; another dim is
// swapped to the end (one copy) and the result is returned as the swapped-back view.
#include "kernels/softmax.h"

#include "autograd/ops.h"

namespace vit {

template <bool Log>
static Variable softmax_op(const Variable& x, int64_t dim) {
  const char* name = Log ? "log_softmax" : "softmax";
  VIT_CHECK(x.defined(), name, "undefined input");
  if (x.dim() == 0) return softmax_op<Log>(x.unsqueeze(0), 0).squeeze(0);
  const int64_t d = normalize_dim(dim, x.dim(), name);
  const int64_t last = x.dim() - 1;
  const Tensor xt = x.data().transpose(d, last).contiguous();
  const int64_t n = xt.size(-1), rows = n == 0 ? 0 : xt.numel() / n;
  Tensor yt = Tensor::empty(xt.shape(), xt.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    if constexpr (Log)
      kernels::log_softmax_forward<T>(xt.data<T>(), yt.data<T>(), rows, n);
    else
      kernels::softmax_forward<T>(xt.data<T>(), yt.data<T>(), rows, n);
  });
  return make_result(yt.transpose(d, last), name, {x}, {yt},
                     [yt, d, last, rows, n](const Tensor& g, std::vector<Tensor>& grads) {
                       const Tensor gt = g.transpose(d, last).contiguous();
                       Tensor dxt = Tensor::zeros(gt.shape(), gt.dtype());
                       dispatch(g.dtype(), [&]<typename T>() {
                         if constexpr (Log)
                           kernels::log_softmax_backward<T>(yt.data<T>(), gt.data<T>(), dxt.data<T>(), rows, n);
                         else
                           kernels::softmax_backward<T>(yt.data<T>(), gt.data<T>(), dxt.data<T>(), rows, n);
                       });
                       accumulate_into(grads[0].transpose(d, last), dxt);
                     });
}

Variable softmax(const Variable& x, int64_t dim) { return softmax_op<false>(x, dim); }
Variable log_softmax(const Variable& x, int64_t dim) { return softmax_op<true>(x, dim); }
Variable Variable::softmax(int64_t dim) const { return vit::softmax(*this, dim); }
Variable Variable::log_softmax(int64_t dim) const { return vit::log_softmax(*this, dim); }

}  // namespace vit
