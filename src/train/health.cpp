// Finiteness checks (see health.h).
#include "train/health.h"

#include <fmt/format.h>

#include <cmath>

#include "core/check.h"
#include "kernels/optim.h"

namespace vit::train {

std::string first_nonfinite(const optim::NamedParameters& params) {
  for (const auto& [name, p] : params) {
    if (!std::isfinite(kernels::sum_squares(p.data().data<float>(), p.numel()))) return name;
  }
  return "";
}

GradientNorms gradient_norms(const optim::NamedParameters& params) {
  GradientNorms out;
  out.squares.assign(params.size(), 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& g = params[i].second.grad();
    if (!g.defined()) continue;
    out.squares[i] = kernels::sum_squares(g.contiguous().data<float>(), g.numel());
    sum += out.squares[i];
  }
  out.norm = std::sqrt(sum);
  return out;
}

std::string first_nonfinite_grad(const optim::NamedParameters& params, const GradientNorms& grads) {
  VIT_CHECK(grads.squares.size() == params.size(), "train", "gradient norms of {} parameters for {}",
            grads.squares.size(), params.size());
  for (size_t i = params.size(); i-- > 0;) {
    if (!std::isfinite(grads.squares[i])) return params[i].first;
  }
  return "";
}

std::string largest_parameter(const optim::NamedParameters& params) {
  std::string best;
  float best_abs = -1.0f;
  for (const auto& [name, p] : params) {
    const Tensor t = p.data().contiguous();
    const float* v = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (std::fabs(v[i]) > best_abs) {
        best_abs = std::fabs(v[i]);
        best = name;
      }
    }
  }
  return fmt::format("'{}' (|w| up to {:.3g})", best, best_abs);
}

std::string step_problem(double loss, const optim::NamedParameters& params, const GradientNorms& grads) {
  const std::string bad_grad = first_nonfinite_grad(params, grads);
  if (std::isfinite(loss) && bad_grad.empty()) return "";
  // (Weights are checked after every update, so here they are finite.)
  if (!std::isfinite(loss)) {
    return fmt::format("loss is {} (the forward pass overflowed; all weights are finite, the largest is {})",
                       number_str(loss), largest_parameter(params));
  }
  return fmt::format("gradient of '{}' went non-finite first in backpropagation (loss {})", bad_grad, number_str(loss));
}

}  // namespace vit::train
