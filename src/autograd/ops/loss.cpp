// cross_entropy (torch.nn.functional.cross_entropy with reduction='mean' and label_smoothing):
// one fused op, softmax + negative log-likelihood, with the closed-form backward p - q.
#include "autograd/ops.h"
#include "kernels/cross_entropy.h"

namespace vit {

Variable cross_entropy(const Variable& logits, const Tensor& targets, double label_smoothing) {
  VIT_CHECK(logits.defined() && logits.dim() == 2, "cross_entropy", "logits must be (batch, classes), got {}",
            logits.defined() ? shape_str(logits.shape()) : "undefined");
  const int64_t rows = logits.size(0), classes = logits.size(1);
  VIT_CHECK(targets.defined() && targets.dtype() == DType::I64 && targets.dim() == 1 && targets.size(0) == rows,
            "cross_entropy", "targets must be int64 ({},), got {} {}", rows,
            targets.defined() ? dtype_name(targets.dtype()) : "undefined",
            targets.defined() ? shape_str(targets.shape()) : "");
  VIT_CHECK(rows > 0 && classes > 0, "cross_entropy", "empty logits {}", shape_str(logits.shape()));
  VIT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy",
            "label_smoothing must be in [0, 1], got {}", label_smoothing);
  const Tensor t = targets.contiguous();
  const int64_t* tp = t.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    VIT_CHECK(tp[r] >= 0 && tp[r] < classes, "cross_entropy", "target {} at row {} is out of range for {} classes",
              tp[r], r, classes);
  }
  const Tensor z = logits.data().contiguous();
  Tensor probs = Tensor::empty(z.shape(), z.dtype());
  const double loss = dispatch(z.dtype(), [&]<typename T>() {
    return kernels::cross_entropy_forward<T>(z.data<T>(), tp, rows, classes, label_smoothing, probs.data<T>());
  });
  return make_result(Tensor::scalar(loss, z.dtype()), "cross_entropy", {logits}, {t},
                     [probs, t, rows, classes, label_smoothing](const Tensor& g, std::vector<Tensor>& grads) {
                       dispatch(g.dtype(), [&]<typename T>() {
                         kernels::cross_entropy_backward<T>(probs.data<T>(), t.data<int64_t>(), rows, classes,
                                                            label_smoothing, g.item(), grads[0].data<T>());
                       });
                     });
}

}  // namespace vit
