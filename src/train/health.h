// Finiteness checks of a training step: which parameter or gradient holds a NaN/Inf, and where
// to look when the forward pass overflowed with finite weights. The trainer stops (or skips the
// step with --skip-nonfinite) with these names in its message; nothing non-finite is saved.
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace vit::train {

// The first parameter (model order) holding a NaN or infinity, or "" if all are finite.
std::string first_nonfinite(const optim::NamedParameters& params);
// The gradients' squared L2 norms from one pass over them: each parameter's (model order; 0
// without a gradient) and the global L2 norm, summed in double in model order as
// optim::grad_norm does (the same number, bit for bit). A step checks its gradients for NaN/Inf
// and clips them with this one norm.
struct GradientNorms {
  std::vector<double> squares;
  double norm = 0.0;
};
GradientNorms gradient_norms(const optim::NamedParameters& params);
// The parameter whose gradient went non-finite first during backpropagation: backward runs
// from the head to the patch embedding, so that is the last one in model order; "" if none.
std::string first_nonfinite_grad(const optim::NamedParameters& params, const GradientNorms& grads);
// "'name' (|w| up to X)" for the parameter with the largest magnitude.
std::string largest_parameter(const optim::NamedParameters& params);
// Why a step cannot be applied (its loss or a gradient is non-finite), or "" when it can.
std::string step_problem(double loss, const optim::NamedParameters& params, const GradientNorms& grads);

}  // namespace vit::train
