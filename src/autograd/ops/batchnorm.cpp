// batch_norm over dim 1 (torch.nn.functional.batch_norm), on kernels/batchnorm.h.
#include "kernels/batchnorm.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {

namespace {

// channels_last: x (..., C), the channels its last dim, every other position a sample of them;
// otherwise x (B, C, ...).
Variable batch_norm_impl(const Variable& x, const Tensor& running_mean, const Tensor& running_var,
                         const Variable& weight, const Variable& bias, bool training, double momentum, double eps,
                         bool channels_last) {
  VIT_CHECK(x.defined(), "batch_norm", "undefined input");
  VIT_CHECK(x.dim() >= 2, "batch_norm", "input must be {}, got {}", channels_last ? "(..., C)" : "(B, C, ...)",
            shape_str(x.shape()));
  // Channels-last runs the rows form (B = 1 sample of P = S positions); otherwise B planes of S.
  const int64_t C = channels_last ? x.size(x.dim() - 1) : x.size(1);
  const int64_t B = channels_last ? 1 : x.size(0);
  const int64_t S = C == 0 || B == 0 ? 0 : x.numel() / (B * C);
  VIT_CHECK(eps >= 0 && std::isfinite(eps), "batch_norm", "eps must be finite and >= 0, got {}", eps);
  VIT_CHECK(momentum >= 0 && momentum <= 1, "batch_norm", "momentum must be in [0, 1], got {}", momentum);
  for (const Variable* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    VIT_CHECK(p->dim() == 1 && p->size(0) == C, "batch_norm", "{} {} does not match the input's {} channels",
              p == &weight ? "weight" : "bias", shape_str(p->shape()), C);
    detail::check_same_dtype(x.data(), p->data(), "batch_norm");
  }
  VIT_CHECK(running_mean.defined() == running_var.defined(), "batch_norm",
            "running_mean and running_var come together (one of them is undefined)");
  const bool running = running_mean.defined();
  VIT_CHECK(training || running, "batch_norm", "evaluation needs running statistics (none given)");
  for (const Tensor* t : {&running_mean, &running_var}) {
    if (!running) break;
    VIT_CHECK(t->dim() == 1 && t->size(0) == C && t->is_contiguous(), "batch_norm",
              "{} {} does not match the input's {} channels", t == &running_mean ? "running_mean" : "running_var",
              shape_str(t->shape()), C);
    detail::check_same_dtype(x.data(), *t, "batch_norm");
  }
  // PyTorch: "Expected more than 1 value per channel when training".
  VIT_CHECK(!training || B * S > 1, "batch_norm", "training needs more than 1 value per channel, got input {}",
            shape_str(x.shape()));
  const Tensor xc = x.data().contiguous();
  const Tensor w = weight.defined() ? weight.data().contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.data().contiguous() : Tensor();
  Tensor mean = Tensor::empty({C}, x.dtype()), rstd = Tensor::empty({C}, x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<typename T>() {
    T* m = mean.data<T>();
    T* s = rstd.data<T>();
    if (training) {
      if (channels_last) {
        kernels::batchnorm_stats_rows<T>(xc.data<T>(), S, C, m, s);  // s holds the variance until below
      } else {
        kernels::batchnorm_stats<T>(xc.data<T>(), B, C, S, m, s);
      }
      if (running) {
        T* rm = running_mean.data<T>();
        T* rv = running_var.data<T>();
        const double unbias = static_cast<double>(B * S) / static_cast<double>(B * S - 1);
        for (int64_t c = 0; c < C; ++c) {
          rm[c] = static_cast<T>((1.0 - momentum) * rm[c] + momentum * m[c]);
          rv[c] = static_cast<T>((1.0 - momentum) * rv[c] + momentum * unbias * s[c]);
        }
        running_mean.bump_version();
        running_var.bump_version();
      }
    } else {
      const T* rm = running_mean.data<T>();
      const T* rv = running_var.data<T>();
      for (int64_t c = 0; c < C; ++c) {
        m[c] = rm[c];
        s[c] = rv[c];
      }
    }
    for (int64_t c = 0; c < C; ++c) s[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s[c]) + eps));
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const T* bp = b.defined() ? b.data<T>() : nullptr;
    if (channels_last) {
      kernels::batchnorm_forward_rows<T>(xc.data<T>(), m, s, wp, bp, y.data<T>(), S, C);
    } else {
      kernels::batchnorm_forward<T>(xc.data<T>(), m, s, wp, bp, y.data<T>(), B, C, S);
    }
  });
  std::vector<Variable> inputs{x};
  const int weight_at = detail::push_optional_input(inputs, weight);
  const int bias_at = detail::push_optional_input(inputs, bias);
  return make_result(
      y, "batch_norm", inputs, {xc, w},
      [xc, w, mean, rstd, B, C, S, training, weight_at, bias_at, channels_last](const Tensor& g,
                                                                                std::vector<Tensor>& grads) {
        const Tensor gc = g.contiguous();
        dispatch(g.dtype(), [&]<typename T>() {
          auto ptr = [&](int at) { return at >= 0 && grads[at].defined() ? grads[at].data<T>() : nullptr; };
          const T* wp = w.defined() ? w.data<T>() : nullptr;
          if (channels_last) {
            kernels::batchnorm_backward_rows<T>(xc.data<T>(), mean.data<T>(), rstd.data<T>(), wp, gc.data<T>(), ptr(0),
                                                ptr(weight_at), ptr(bias_at), S, C, training);
          } else {
            kernels::batchnorm_backward<T>(xc.data<T>(), mean.data<T>(), rstd.data<T>(), wp, gc.data<T>(), ptr(0),
                                           ptr(weight_at), ptr(bias_at), B, C, S, training);
          }
        });
      });
}

}  // namespace

Variable batch_norm(const Variable& x, const Tensor& running_mean, const Tensor& running_var, const Variable& weight,
                    const Variable& bias, bool training, double momentum, double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps, false);
}

Variable batch_norm_channels_last(const Variable& x, const Tensor& running_mean, const Tensor& running_var,
                                  const Variable& weight, const Variable& bias, bool training, double momentum,
                                  double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps, true);
}

}  // namespace vit
