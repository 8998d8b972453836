// vit.Tensor's math: reductions, elementwise functions and Python's operators,
// each the C++ op the CLI trains with (autograd/ops.h); comparisons (==, <,
// ...) elementwise as torch's; truth and numpy's conversions (numpy arrays and
// scalars mix with tensors as Python numbers do).
#include <pybind11/stl.h>

#include <optional>

#include "autograd/compare.h"
#include "autograd/ops.h"
#include "convert.h"
#include "core/check.h"

namespace vit::python {
namespace {

using kernels::Compare;

// The other operand of an arithmetic operator or comparison: a vit.Tensor, a
// Python int / float (a 0-d tensor) or a numpy array or scalar of numbers.
// Anything else: no value (the operator answers NotImplemented, and Python
// raises its TypeError "unsupported operand type(s) for *: 'vit.Tensor' and
// 'str'", as for torch tensors; == answers False).
std::optional<Variable> operand(const py::object &o) {
  if (py::isinstance<Variable>(o)) return o.cast<Variable>();
  if (py::isinstance<py::bool_>(o)) return std::nullopt;
  if (py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)) return Variable(Tensor::scalar(number_of(o)));
  if (is_numpy_number(o)) return Variable(tensor_of(o));
  return std::nullopt;
}

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

// a OP b for a Python operator, NotImplemented when b is not a number or a
// tensor.
template <class Op>
py::object binary(const Variable &a, const py::object &b, bool reflected, Op op) {
  const std::optional<Variable> other = operand(b);
  if (!other) return not_implemented();
  return py::cast(reflected ? op(*other, a) : op(a, *other));
}

// __add__ and __radd__ (and so on) for one arithmetic operator.
template <class Op>
void bind_operator(py::class_<Variable> &t, const std::string &name, Op op) {
  t.def(("__" + name + "__").c_str(), [op](const Variable &a, const py::object &b) { return binary(a, b, false, op); });
  t.def(("__r" + name + "__").c_str(), [op](const Variable &a, const py::object &b) { return binary(a, b, true, op); });
}

// a == b (and the other five): a 0/1 tensor (no gradient), NotImplemented for
// other operands.
void bind_comparison(py::class_<Variable> &t, const char *name, Compare op) {
  t.def(name, [op](const Variable &a, const py::object &b) -> py::object {
    const std::optional<Variable> other = operand(b);
    if (!other) return not_implemented();
    return py::cast(Variable(compare(op, a.data(), other->data())));
  });
}

// bool(t): the truth of its one element (torch refuses a tensor of none or
// several).
bool truth(const Variable &v) {
  VIT_CHECK(v.numel() == 1, "bool", "Boolean value of Tensor with {} is ambiguous (shape {})",
            v.numel() == 0 ? "no values" : "more than one value", shape_str(v.shape()));
  return v.item() != 0.0;
}

void bind_reductions(py::class_<Variable> &t) {
  t.def(
       "sum",
       [](const Variable &v, const py::object &dim, bool keepdim) { return v.sum(dims_of(dim, "sum"), keepdim); },
       py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "mean",
          [](const Variable &v, const py::object &dim, bool keepdim) { return v.mean(dims_of(dim, "mean"), keepdim); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "var",
          [](const Variable &v, const py::object &dim, bool unbiased, bool keepdim) {
            return v.var(dims_of(dim, "var"), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "std",
          [](const Variable &v, const py::object &dim, bool unbiased, bool keepdim) {
            return v.std(dims_of(dim, "std"), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "max", [](const Variable &v, int64_t dim, bool keepdim) { return v.max(dim, keepdim); }, py::arg("dim"),
          py::arg("keepdim") = false)
      .def(
          "argmax", [](const Variable &v, int64_t dim) { return Variable(v.argmax(dim).to(DType::F32)); },
          py::arg("dim"));
}

void bind_functions(py::class_<Variable> &t) {
  t.def("exp", &Variable::exp)
      .def("log", &Variable::log)
      .def("sqrt", &Variable::sqrt)
      .def("tanh", &Variable::tanh)
      .def("relu", &Variable::relu)
      .def("sigmoid", &Variable::sigmoid)
      .def("softmax", &Variable::softmax, py::arg("dim"))
      .def("log_softmax", &Variable::log_softmax, py::arg("dim"))
      .def("matmul", &Variable::matmul);
}

void bind_operators(py::class_<Variable> &t) {
  t.def("__neg__", [](const Variable &v) { return vit::neg(v); })
      .def("__pow__",
           [](const Variable &v, const py::object &e) -> py::object {
             const bool number =
                 !py::isinstance<py::bool_>(e) && (py::isinstance<py::int_>(e) || py::isinstance<py::float_>(e) ||
                                                   (is_numpy_number(e) && py::len(e.attr("shape")) == 0));
             return number ? py::cast(v.pow(number_of(e))) : not_implemented();
           })
      .def("__matmul__", [](const Variable &a, const Variable &b) { return a.matmul(b); });
  bind_operator(t, "add", [](const Variable &x, const Variable &y) { return x + y; });
  bind_operator(t, "sub", [](const Variable &x, const Variable &y) { return x - y; });
  bind_operator(t, "mul", [](const Variable &x, const Variable &y) { return x * y; });
  bind_operator(t, "truediv", [](const Variable &x, const Variable &y) { return x / y; });
  bind_comparison(t, "__eq__", Compare::Eq);
  bind_comparison(t, "__ne__", Compare::Ne);
  bind_comparison(t, "__lt__", Compare::Lt);
  bind_comparison(t, "__le__", Compare::Le);
  bind_comparison(t, "__gt__", Compare::Gt);
  bind_comparison(t, "__ge__", Compare::Ge);
  // Hashed by identity, as torch's tensors (== no longer is identity).
  t.attr("__hash__") = py::module_::import("builtins").attr("object").attr("__hash__");
}

void bind_conversions(py::class_<Variable> &t) {
  t.def("__bool__", &truth)
      .def("__float__", [](const Variable &v) { return v.item(); })
      .def("__int__", [](const Variable &v) { return py::int_(py::float_(v.item())); })  // NaN: Python's ValueError
      .def(
          "__array__",
          [](const Variable &v, const py::object &dtype) -> py::object {
            py::object a = numpy_of(v.data());
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none());
  // numpy defers to the tensor's operators (np.float32(2) * t, array + t are
  // tensors), rather than taking the tensor for a sequence of numbers.
  t.attr("__array_ufunc__") = py::none();
}

}  // namespace

void bind_tensor_math(py::class_<Variable> &tensor) {
  bind_reductions(tensor);
  bind_functions(tensor);
  bind_operators(tensor);
  bind_conversions(tensor);
}

}  // namespace vit::python
