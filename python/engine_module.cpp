// The engine's door in Python: vit.Tensor (the engine's Variable: a float32 tensor with
// reverse-mode autograd) and vit.nn (its layers under PyTorch's names), so the seed notebooks'
// pieces run on the engine. Separate from the facade's translation (vit_module.cpp): this file
// speaks the engine's types, that one only <vit/vit.h>'s.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "autograd/ops.h"
#include "nn/layers.h"

namespace py = pybind11;

namespace vit::python {
namespace {

// vit.Tensor: the engine's Variable (a tensor with autograd).
vit::Variable tensor_from(const py::array_t<double, py::array::c_style | py::array::forcecast>& a,
                          bool requires_grad) {
  std::vector<double> values(a.data(), a.data() + a.size());
  vit::Shape shape(a.shape(), a.shape() + a.ndim());
  vit::Tensor t = vit::Tensor::from_data(values, shape).to(vit::DType::F32);
  return vit::Variable(t, requires_grad);
}

py::array_t<double> numpy_of(const vit::Tensor& t) {
  std::vector<py::ssize_t> dims(t.shape().begin(), t.shape().end());
  py::array_t<double> out(dims);
  const std::vector<double> v = t.to_vector();
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

// The other operand of an arithmetic operator: a vit.Tensor, or a Python int / float (a 0-d
// tensor). Anything else: no value (the operator answers NotImplemented, and Python raises its
// TypeError "unsupported operand type(s) for *: 'vit.Tensor' and 'str'", as for torch tensors).
std::optional<vit::Variable> operand(const py::object& o) {
  if (py::isinstance<vit::Variable>(o)) return o.cast<vit::Variable>();
  if (py::isinstance<py::bool_>(o) || !(py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)))
    return std::nullopt;
  return vit::Variable(vit::Tensor::scalar(o.cast<double>()));
}

// a OP b for a Python operator, NotImplemented when b is not a number or a tensor.
template <class Op>
py::object binary(const vit::Variable& a, const py::object& b, bool reflected, Op op) {
  const std::optional<vit::Variable> other = operand(b);
  if (!other) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(reflected ? op(*other, a) : op(a, *other));
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<vit::Variable>(m, "Tensor", "A float32 tensor with reverse-mode autograd (the engine's Variable).")
      .def(py::init(&tensor_from), py::arg("data"), py::arg("requires_grad") = false)
      .def("numpy", [](const vit::Variable& v) { return numpy_of(v.data()); })
      .def_property_readonly("shape", [](const vit::Variable& v) { return v.shape(); })
      .def_property_readonly("grad",
                             [](const vit::Variable& v) -> py::object {
                               if (!v.grad().defined()) return py::none();
                               return numpy_of(v.grad());
                             })
      .def_property_readonly("requires_grad", &vit::Variable::requires_grad)
      .def_property_readonly("is_leaf", &vit::Variable::is_leaf)
      .def_property_readonly("grad_fn", [](const vit::Variable& v) { return v.grad_fn(); })
      .def("item", &vit::Variable::item)
      .def("backward", [](const vit::Variable& v) { v.backward(); })
      .def("reshape", &vit::Variable::reshape, py::arg("shape"))
      .def("permute", &vit::Variable::permute, py::arg("dims"))
      .def("transpose", &vit::Variable::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("unfold", &vit::Variable::unfold, py::arg("dim"), py::arg("size"), py::arg("step"))
      .def("flatten", &vit::Variable::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("sum", &vit::Variable::sum, py::arg("dims") = std::vector<int64_t>{}, py::arg("keepdim") = false)
      .def("mean", &vit::Variable::mean, py::arg("dims") = std::vector<int64_t>{}, py::arg("keepdim") = false)
      .def("std", &vit::Variable::std, py::arg("dims") = std::vector<int64_t>{}, py::arg("unbiased") = true,
           py::arg("keepdim") = false)
      .def("exp", &vit::Variable::exp)
      .def("tanh", &vit::Variable::tanh)
      .def("softmax", &vit::Variable::softmax, py::arg("dim"))
      .def("matmul", &vit::Variable::matmul)
      .def("__add__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, false, [](const vit::Variable& x, const vit::Variable& y) { return x + y; });
           })
      .def("__radd__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, true, [](const vit::Variable& x, const vit::Variable& y) { return x + y; });
           })
      .def("__sub__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, false, [](const vit::Variable& x, const vit::Variable& y) { return x - y; });
           })
      .def("__rsub__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, true, [](const vit::Variable& x, const vit::Variable& y) { return x - y; });
           })
      .def("__mul__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, false, [](const vit::Variable& x, const vit::Variable& y) { return x * y; });
           })
      .def("__rmul__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, true, [](const vit::Variable& x, const vit::Variable& y) { return x * y; });
           })
      .def("__truediv__", [](const vit::Variable& a, const py::object& b) {
             return binary(a, b, false, [](const vit::Variable& x, const vit::Variable& y) { return x / y; });
           })
      .def("__matmul__", [](const vit::Variable& a, const vit::Variable& b) { return a.matmul(b); })
      .def("__repr__", [](const vit::Variable& v) { return v.to_string(); });

  py::module_ nn = m.def_submodule("nn", "Layers of the engine (PyTorch's names).");
  py::class_<vit::nn::LayerNorm, std::shared_ptr<vit::nn::LayerNorm>>(nn, "LayerNorm")
      .def(py::init([](std::vector<int64_t> shape, double eps, bool affine) {
             return std::make_shared<vit::nn::LayerNorm>(vit::Shape(shape.begin(), shape.end()), eps, affine);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def("__call__", [](vit::nn::LayerNorm& ln, const vit::Variable& x) { return ln.forward(x); })
      .def_property_readonly("weight", [](const vit::nn::LayerNorm& ln) { return ln.weight; })
      .def_property_readonly("bias", [](const vit::nn::LayerNorm& ln) { return ln.bias; });
}

}  // namespace vit::python
