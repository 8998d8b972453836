// Unary functions (exp, log, sqrt, tanh, relu, sigmoid, gelu, ...), pow and scalar arithmetic.
// Forward saves input and output; the kernel's backward picks whichever it needs.
#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {

using kernels::Unary;

static Variable unary_op(Unary op, const Variable& x) {
  const char* name = kernels::unary_name(op);
  VIT_CHECK(x.defined(), name, "undefined input");
  const Tensor xc = x.data().contiguous();
  Tensor y = detail::unary(op, xc);
  return make_result(y, name, {x}, {xc, y}, [op, xc, y](const Tensor& g, std::vector<Tensor>& grads) {
    dispatch(g.dtype(), [&]<typename T>() {
      kernels::unary_backward<T>(op, xc.data<T>(), y.data<T>(), g.data<T>(), grads[0].data<T>(), g.numel());
    });
  });
}

Variable neg(const Variable& x) { return unary_op(Unary::Neg, x); }
Variable exp(const Variable& x) { return unary_op(Unary::Exp, x); }
Variable log(const Variable& x) { return unary_op(Unary::Log, x); }
Variable sqrt(const Variable& x) { return unary_op(Unary::Sqrt, x); }
Variable tanh(const Variable& x) { return unary_op(Unary::Tanh, x); }
Variable relu(const Variable& x) { return unary_op(Unary::Relu, x); }
Variable sigmoid(const Variable& x) { return unary_op(Unary::Sigmoid, x); }
Variable abs(const Variable& x) { return unary_op(Unary::Abs, x); }
Variable gelu(const Variable& x, bool tanh_approximation) {
  return unary_op(tanh_approximation ? Unary::GeluTanh : Unary::Gelu, x);
}

Variable pow(const Variable& x, double exponent) {
  VIT_CHECK(x.defined(), "pow", "undefined input");
  const Tensor xc = x.data().contiguous();
  Tensor y = Tensor::empty(xc.shape(), xc.dtype());
  dispatch(xc.dtype(), [&]<typename T>() { kernels::pow_forward<T>(xc.data<T>(), exponent, y.data<T>(), xc.numel()); });
  return make_result(y, "pow", {x}, {xc}, [xc, exponent](const Tensor& g, std::vector<Tensor>& grads) {
    dispatch(g.dtype(), [&]<typename T>() {
      kernels::pow_backward<T>(xc.data<T>(), exponent, g.data<T>(), grads[0].data<T>(), g.numel());
    });
  });
}

// y = a * x + b; dx += a * dy.
static Variable affine_op(const Variable& x, double a, double b, const char* name) {
  VIT_CHECK(x.defined(), name, "undefined input");
  Tensor y = detail::affine(x.data(), a, b);
  return make_result(y, name, {x}, {}, [a](const Tensor& g, std::vector<Tensor>& grads) {
    accumulate_into(grads[0], detail::affine(g, a, 0.0));
  });
}

Variable add(const Variable& a, double s) { return affine_op(a, 1.0, s, "add"); }
Variable mul(const Variable& a, double s) { return affine_op(a, s, 0.0, "mul"); }
Variable sub(double s, const Variable& a) { return affine_op(a, -1.0, s, "rsub"); }
Variable div(double s, const Variable& a) { return mul(pow(a, -1.0), s); }

Variable operator+(const Variable& a, double s) { return add(a, s); }
Variable operator+(double s, const Variable& a) { return add(a, s); }
Variable operator-(const Variable& a, double s) { return add(a, -s); }
Variable operator-(double s, const Variable& a) { return sub(s, a); }
Variable operator*(const Variable& a, double s) { return mul(a, s); }
Variable operator*(double s, const Variable& a) { return mul(a, s); }
Variable operator/(const Variable& a, double s) { return mul(a, 1.0 / s); }
Variable operator/(double s, const Variable& a) { return div(s, a); }
Variable operator-(const Variable& a) { return neg(a); }

// Member spellings (PyTorch's x.exp(), x.pow(2), ...).
Variable Variable::pow(double exponent) const { return vit::pow(*this, exponent); }
Variable Variable::exp() const { return vit::exp(*this); }
Variable Variable::log() const { return vit::log(*this); }
Variable Variable::sqrt() const { return vit::sqrt(*this); }
Variable Variable::tanh() const { return vit::tanh(*this); }
Variable Variable::relu() const { return vit::relu(*this); }
Variable Variable::sigmoid() const { return vit::sigmoid(*this); }
Variable Variable::gelu(bool tanh_approximation) const { return vit::gelu(*this, tanh_approximation); }

}  // namespace vit
