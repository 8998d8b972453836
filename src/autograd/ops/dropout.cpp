// dropout (torch.nn.functional.dropout): inverted scaling in training, identity in eval.
#include "kernels/dropout.h"

#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {

Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  VIT_CHECK(x.defined(), "dropout", "undefined input");
  VIT_CHECK(p >= 0.0 && p <= 1.0, "dropout", "probability must be in [0, 1], got {}", p);
  if (!training || p == 0.0) return x;
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    kernels::dropout_mask_batch<T>(mask.data<T>(), mask.numel(), x.dim() > 0 ? x.size(0) : 1, p, gen);
  });
  Tensor y = detail::binary(kernels::Binary::Mul, x.data(), mask);
  return make_result(y, "dropout", {x}, {}, [mask](const Tensor& g, std::vector<Tensor>& grads) {
    accumulate_into(grads[0], detail::binary(kernels::Binary::Mul, g, mask));
  });
}

}  // namespace vit
