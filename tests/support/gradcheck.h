// Finite-difference gradient checks in float64: for a function f of several tensors, compares
// the gradient of L = sum(f(inputs) * w) (w a fixed random weighting) computed by backward()
// with central differences (L(x + eps) - L(x - eps)) / (2 eps) for every input element.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "support/tolerances.h"

namespace vit::testing {

using GradFn = std::function<Variable(const std::vector<Variable>&)>;

// inputs must be float64; only those with checked[i] (default all) are checked. Passes when
// |analytic - numeric| <= tol * (1 + |numeric|); eps is the step (support/tolerances.h).
::testing::AssertionResult gradcheck(const GradFn& f, const std::vector<Tensor>& inputs, std::vector<bool> checked = {},
                                     double eps = kFiniteDiffStep, double tol = kGradcheckTol);

// As gradcheck, for a function of existing float64 leaves (a module's parameters and an
// input): perturbs each leaf's data in place, so f sees the change through the module.
::testing::AssertionResult gradcheck_leaves(const std::function<Variable()>& f, const std::vector<Variable>& leaves,
                                            double eps = kFiniteDiffStep, double tol = kGradcheckTol);

// Random float64 tensor (seeded), values N(0, 1) * scale + shift.
Tensor random_f64(const Shape& shape, uint64_t seed, double scale = 1.0, double shift = 0.0);

}  // namespace vit::testing

#define EXPECT_GRADCHECK(...) EXPECT_TRUE(::vit::testing::gradcheck(__VA_ARGS__))
