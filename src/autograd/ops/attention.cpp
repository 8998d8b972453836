// self_attention: the fused multi-head attention core (kernels/attention.h) as one autograd
// op with a hand-written backward. Saves the attention probabilities and the dropout mask.
#include "kernels/attention.h"

#include <cmath>

#include "autograd/ops.h"
#include "kernels/dropout.h"

namespace vit {

Variable self_attention(const Variable& qkv, int64_t num_heads, double attn_dropout, bool training, Generator* gen,
                        Tensor* probs_out) {
  VIT_CHECK(qkv.defined() && qkv.dim() == 3, "attention", "qkv must be (B, N, 3*D), got {}",
            qkv.defined() ? shape_str(qkv.shape()) : "undefined");
  VIT_CHECK(num_heads >= 1 && qkv.size(2) % (3 * num_heads) == 0, "attention",
            "qkv {}: last dim {} is not 3 * num_heads ({}) * head_dim", shape_str(qkv.shape()), qkv.size(2), num_heads);
  VIT_CHECK(attn_dropout >= 0.0 && attn_dropout <= 1.0, "attention", "dropout must be in [0, 1], got {}", attn_dropout);
  const bool use_dropout = training && attn_dropout > 0.0;
  VIT_CHECK(!use_dropout || gen != nullptr, "attention", "dropout in training needs a Generator");
  const kernels::AttentionShape s{qkv.size(0), qkv.size(1), num_heads, qkv.size(2) / (3 * num_heads)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const Tensor x = qkv.data().contiguous();
  Tensor probs = Tensor::empty({s.batch, num_heads, s.tokens, s.tokens}, x.dtype());
  Tensor mask = use_dropout ? Tensor::empty(probs.shape(), x.dtype()) : Tensor();
  Tensor out = Tensor::empty({s.batch, s.tokens, s.dim()}, x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    if (use_dropout) kernels::dropout_mask_batch<T>(mask.data<T>(), mask.numel(), s.batch, attn_dropout, *gen);
    kernels::attention_forward<T>(s, x.data<T>(), use_dropout ? mask.data<T>() : nullptr, scale, probs.data<T>(),
                                  out.data<T>());
  });
  if (probs_out) *probs_out = probs;
  return make_result(
      out, "attention", {qkv}, {x, probs}, [s, x, probs, mask, scale](const Tensor& g, std::vector<Tensor>& grads) {
        dispatch(g.dtype(), [&]<typename T>() {
          kernels::attention_backward<T>(s, x.data<T>(), probs.data<T>(), mask.defined() ? mask.data<T>() : nullptr,
                                         scale, g.data<T>(), grads[0].data<T>());
        });
      });
}

}  // namespace vit
