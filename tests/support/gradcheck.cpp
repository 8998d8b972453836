// Finite-difference gradient checks (see gradcheck.h).
#include "support/gradcheck.h"

#include <cmath>

namespace vit::testing {

Tensor random_f64(const Shape& shape, uint64_t seed, double scale, double shift) {
  Generator gen(seed);
  Tensor t = Tensor::randn(shape, gen, DType::F64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] * scale + shift;
  return t;
}

::testing::AssertionResult gradcheck(const GradFn& f, const std::vector<Tensor>& inputs, std::vector<bool> checked,
                                     double eps, double tol) {
  if (checked.empty()) checked.assign(inputs.size(), true);
  std::vector<Variable> vars, leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::F64) return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    vars.emplace_back(inputs[i].clone(), static_cast<bool>(checked[i]));
    if (checked[i]) leaves.push_back(vars.back());
  }
  return gradcheck_leaves([&] { return f(vars); }, leaves, eps, tol);
}

::testing::AssertionResult gradcheck_leaves(const std::function<Variable()>& f, const std::vector<Variable>& leaves,
                                            double eps, double tol) {
  for (const Variable& leaf : leaves) {
    if (leaf.dtype() != DType::F64 || !leaf.is_leaf() || !leaf.requires_grad() || !leaf.data().is_contiguous()) {
      return ::testing::AssertionFailure() << "gradcheck_leaves needs contiguous float64 leaves with requires_grad";
    }
    Variable(leaf).set_grad(Tensor());
  }
  Variable out = f();
  const Tensor weight = random_f64(out.shape(), 12345);
  sum(out * Variable(weight)).backward();
  auto evaluate = [&]() {
    NoGradGuard no_grad;
    return sum(f() * Variable(weight)).item();
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor g = leaves[i].grad();
    double* p = leaves[i].data().data<double>();
    for (int64_t j = 0; j < leaves[i].numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + eps;
      const double plus = evaluate();
      p[j] = saved - eps;
      const double minus = evaluate();
      p[j] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double analytic = g.defined() ? g.data<double>()[j] : 0.0;
      if (!(std::fabs(analytic - numeric) <= tol * (1.0 + std::fabs(numeric)))) {
        return ::testing::AssertionFailure()
               << fmt::format("leaf {} element {} (shape {}): analytic {:.10g} vs numeric {:.10g} (diff {:.3g})", i, j,
                              shape_str(leaves[i].shape()), analytic, numeric, std::fabs(analytic - numeric));
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace vit::testing
