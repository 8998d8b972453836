// vit.Tensor's math: reductions, elementwise functions and Python's operators, each the C++ op
// the CLI trains with (autograd/ops.h).
#include <pybind11/stl.h>

#include <optional>

#include "autograd/ops.h"
#include "convert.h"

namespace vit::python {
namespace {

// The other operand of an arithmetic operator: a vit.Tensor, or a Python int / float (a 0-d
// tensor). Anything else: no value (the operator answers NotImplemented, and Python raises its
// TypeError "unsupported operand type(s) for *: 'vit.Tensor' and 'str'", as for torch tensors).
std::optional<Variable> operand(const py::object& o) {
  if (py::isinstance<Variable>(o)) return o.cast<Variable>();
  if (py::isinstance<py::bool_>(o) || !(py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)))
    return std::nullopt;
  return Variable(Tensor::scalar(o.cast<double>()));
}

// a OP b for a Python operator, NotImplemented when b is not a number or a tensor.
template <class Op>
py::object binary(const Variable& a, const py::object& b, bool reflected, Op op) {
  const std::optional<Variable> other = operand(b);
  if (!other) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(reflected ? op(*other, a) : op(a, *other));
}

// __add__ and __radd__ (and so on) for one arithmetic operator.
template <class Op>
void bind_operator(py::class_<Variable>& t, const std::string& name, Op op) {
  t.def(("__" + name + "__").c_str(), [op](const Variable& a, const py::object& b) { return binary(a, b, false, op); });
  t.def(("__r" + name + "__").c_str(), [op](const Variable& a, const py::object& b) { return binary(a, b, true, op); });
}

void bind_reductions(py::class_<Variable>& t) {
  t.def(
       "sum", [](const Variable& v, const py::object& dim, bool keepdim) { return v.sum(dims_of(dim), keepdim); },
       py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "mean", [](const Variable& v, const py::object& dim, bool keepdim) { return v.mean(dims_of(dim), keepdim); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "var",
          [](const Variable& v, const py::object& dim, bool unbiased, bool keepdim) {
            return v.var(dims_of(dim), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "std",
          [](const Variable& v, const py::object& dim, bool unbiased, bool keepdim) {
            return v.std(dims_of(dim), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "max", [](const Variable& v, int64_t dim, bool keepdim) { return v.max(dim, keepdim); }, py::arg("dim"),
          py::arg("keepdim") = false)
      .def(
          "argmax", [](const Variable& v, int64_t dim) { return Variable(v.argmax(dim).to(DType::F32)); },
          py::arg("dim"));
}

void bind_functions(py::class_<Variable>& t) {
  t.def("exp", &Variable::exp)
      .def("log", &Variable::log)
      .def("sqrt", &Variable::sqrt)
      .def("tanh", &Variable::tanh)
      .def("relu", &Variable::relu)
      .def("sigmoid", &Variable::sigmoid)
      .def("softmax", &Variable::softmax, py::arg("dim"))
      .def("matmul", &Variable::matmul);
}

void bind_operators(py::class_<Variable>& t) {
  t.def("__neg__", [](const Variable& v) { return vit::neg(v); })
      .def("__pow__", [](const Variable& v, double e) { return v.pow(e); })
      .def("__matmul__", [](const Variable& a, const Variable& b) { return a.matmul(b); });
  bind_operator(t, "add", [](const Variable& x, const Variable& y) { return x + y; });
  bind_operator(t, "sub", [](const Variable& x, const Variable& y) { return x - y; });
  bind_operator(t, "mul", [](const Variable& x, const Variable& y) { return x * y; });
  bind_operator(t, "truediv", [](const Variable& x, const Variable& y) { return x / y; });
}

}  // namespace

void bind_tensor_math(py::class_<Variable>& tensor) {
  bind_reductions(tensor);
  bind_functions(tensor);
  bind_operators(tensor);
}

}  // namespace vit::python
