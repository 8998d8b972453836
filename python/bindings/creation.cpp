// The functions that make and combine tensors (torch's names): vit.tensor, manual_seed, zeros,
// ones, rand, randn, arange, cat, stack, matmul, softmax, exp, sqrt, tanh, and vit.no_grad.
#include <pybind11/stl.h>

#include <optional>

#include "autograd/ops.h"
#include "convert.h"

namespace vit::python {
namespace {

// with vit.no_grad(): ... -- no graph is recorded inside.
struct NoGrad {
  std::optional<NoGradGuard> guard;
};

void bind_makers(py::module_& m) {
  m.def("tensor", &make_tensor, py::arg("data"), py::arg("requires_grad") = false);
  m.def(
      "manual_seed", [](uint64_t seed) { generator() = std::make_shared<Generator>(seed); }, py::arg("seed"));
  m.def("zeros", [](const py::args& a) { return Variable(Tensor::zeros(sizes(a, "zeros"))); });
  m.def("ones", [](const py::args& a) { return Variable(Tensor::ones(sizes(a, "ones"))); });
  m.def("rand", [](const py::args& a) { return Variable(Tensor::rand(sizes(a, "rand"), *generator())); });
  m.def("randn", [](const py::args& a) { return Variable(Tensor::randn(sizes(a, "randn"), *generator())); });
  m.def(
      "arange",
      [](double a, std::optional<double> b, double step) {
        return Variable(b ? Tensor::arange(a, *b, step) : Tensor::arange(a));
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1.0);
}

// A list or tuple of tensors, each element checked by name (pybind's own message lists overloads).
std::vector<Variable> tensors_of(const py::handle& xs, const char* op) {
  VIT_CHECK(py::isinstance<py::list>(xs) || py::isinstance<py::tuple>(xs), op,
            "tensors must be a list or tuple of vit.Tensor, got {}", type_name(xs));
  std::vector<Variable> out;
  for (const py::handle& x : xs) {
    VIT_CHECK(py::isinstance<Variable>(x), op, "element {} of tensors is {}, not a vit.Tensor", out.size(),
              type_name(x));
    out.push_back(x.cast<Variable>());
  }
  return out;
}

void bind_combiners(py::module_& m) {
  m.def(
      "cat", [](const py::handle& xs, int64_t dim) { return vit::cat(tensors_of(xs, "cat"), dim); }, py::arg("tensors"),
      py::arg("dim") = 0);
  m.def(
      "stack", [](const py::handle& xs, int64_t dim) { return vit::stack(tensors_of(xs, "stack"), dim); },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def("matmul", [](const Variable& a, const Variable& b) { return vit::matmul(a, b); });
  m.def(
      "softmax", [](const Variable& x, int64_t dim) { return vit::softmax(x, dim); }, py::arg("input"), py::arg("dim"));
  m.def("exp", [](const Variable& v) { return v.exp(); });
  m.def("sqrt", [](const Variable& v) { return v.sqrt(); });
  m.def("tanh", [](const Variable& v) { return v.tanh(); });
}

}  // namespace

void bind_creation(py::module_& m) {
  bind_makers(m);
  bind_combiners(m);
  py::class_<NoGrad>(m, "no_grad", "with vit.no_grad(): no graph is recorded (torch.no_grad)")
      .def(py::init<>())
      .def("__enter__", [](NoGrad& n) { n.guard.emplace(); })
      .def("__exit__", [](NoGrad& n, const py::args&) {
        n.guard.reset();
        return false;
      });
}

}  // namespace vit::python
