// add, sub, mul, div with NumPy/PyTorch broadcasting. The gradient of a broadcast operand is
// the output gradient summed over the dims it was broadcast along (accumulate_reduced).
#include "autograd/ops.h"
#include "autograd/tensor_math.h"

namespace vit {

using kernels::Binary;
using kernels::Unary;

static Variable binary_op(Binary op, const Variable& a, const Variable& b) {
  const char* name = kernels::binary_name(op);
  VIT_CHECK(a.defined() && b.defined(), name, "undefined operand");
  Tensor y = detail::binary(op, a.data(), b.data());
  const Tensor ad = a.data(), bd = b.data();
  // What the backward reads (as torch saves them): nothing for + and -; for * each operand when the
  // other one's gradient is wanted; for / b, and the result when b's gradient is wanted.
  std::vector<Tensor> saved;
  if (op == Binary::Mul) saved = {b.requires_grad() ? ad : Tensor(), a.requires_grad() ? bd : Tensor()};
  if (op == Binary::Div) saved = {bd, b.requires_grad() ? y : Tensor()};
  return make_result(y, name, {a, b}, saved, [op, ad, bd, y](const Tensor& g, std::vector<Tensor>& grads) {
    if (grads[0].defined()) {
      switch (op) {
        case Binary::Add:
        case Binary::Sub:
          detail::accumulate_reduced(grads[0], g);
          break;
        case Binary::Mul:
          detail::accumulate_reduced(grads[0], detail::binary(Binary::Mul, g, bd));
          break;
        case Binary::Div:
          detail::accumulate_reduced(grads[0], detail::binary(Binary::Div, g, bd));
          break;
      }
    }
    if (grads[1].defined()) {
      switch (op) {
        case Binary::Add:
          detail::accumulate_reduced(grads[1], g);
          break;
        case Binary::Sub:
          detail::accumulate_reduced(grads[1], detail::unary(Unary::Neg, g));
          break;
        case Binary::Mul:
          detail::accumulate_reduced(grads[1], detail::binary(Binary::Mul, g, ad));
          break;
        case Binary::Div: {  // d(a/b)/db = -y / b
          const Tensor t = detail::binary(Binary::Div, detail::binary(Binary::Mul, g, y), bd);
          detail::accumulate_reduced(grads[1], detail::unary(Unary::Neg, t));
          break;
        }
      }
    }
  });
}

Variable add(const Variable& a, const Variable& b) { return binary_op(Binary::Add, a, b); }
Variable sub(const Variable& a, const Variable& b) { return binary_op(Binary::Sub, a, b); }
Variable mul(const Variable& a, const Variable& b) { return binary_op(Binary::Mul, a, b); }
Variable div(const Variable& a, const Variable& b) { return binary_op(Binary::Div, a, b); }

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }

}  // namespace vit
