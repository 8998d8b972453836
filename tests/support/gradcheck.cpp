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
  std::vector<Tensor> values;
  for (const Tensor& t : inputs) {
    if (t.dtype() != DType::F64) return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    values.push_back(t.clone());
  }
  // Analytic gradients.
  std::vector<Variable> vars;
  for (size_t i = 0; i < values.size(); ++i) vars.emplace_back(values[i], static_cast<bool>(checked[i]));
  Variable out = f(vars);
  const Tensor weight = random_f64(out.shape(), 12345);
  Variable loss = sum(out * Variable(weight));
  loss.backward();

  auto evaluate = [&]() {
    NoGradGuard no_grad;
    std::vector<Variable> plain;
    for (const Tensor& t : values) plain.emplace_back(t, false);
    return sum(f(plain) * Variable(weight)).item();
  };
  for (size_t i = 0; i < values.size(); ++i) {
    if (!checked[i]) continue;
    const Tensor& g = vars[i].grad();
    double* p = values[i].data<double>();
    for (int64_t j = 0; j < values[i].numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + eps;
      const double plus = evaluate();
      p[j] = saved - eps;
      const double minus = evaluate();
      p[j] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double analytic = g.defined() ? g.contiguous().data<double>()[j] : 0.0;
      if (!(std::fabs(analytic - numeric) <= tol * (1.0 + std::fabs(numeric)))) {
        return ::testing::AssertionFailure() << fmt::format(
                   "input {} element {} (shape {}): analytic {:.10g} vs numeric {:.10g} (diff {:.3g})", i, j,
                   shape_str(values[i].shape()), analytic, numeric, std::fabs(analytic - numeric));
      }
    }
  }
  return ::testing::AssertionSuccess();
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
        return ::testing::AssertionFailure() << fmt::format(
                   "leaf {} element {} (shape {}): analytic {:.10g} vs numeric {:.10g} (diff {:.3g})", i, j,
                   shape_str(leaves[i].shape()), analytic, numeric, std::fabs(analytic - numeric));
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace vit::testing
