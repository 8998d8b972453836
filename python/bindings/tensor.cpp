// vit.Tensor (the engine's Variable: float32 with reverse-mode autograd), in torch's words: making
// one, its shape and autograd state, copies and views. Math is in tensor_math.cpp, t[...] in
// indexing.cpp.
#include <pybind11/stl.h>

#include <optional>

#include "convert.h"
#include "core/check.h"

namespace vit::python {
namespace {

py::object size(const Variable& v, std::optional<int64_t> dim) {
  if (!dim) return size_of(v.shape());
  const auto n = static_cast<int64_t>(v.shape().size());
  VIT_CHECK(*dim >= -n && *dim < n, "size", "dimension {} out of range for {} dimensions", *dim, n);
  return py::int_(v.shape()[static_cast<size_t>(*dim < 0 ? *dim + n : *dim)]);
}

// t.copy_(src): an in-place change, counted in the version of t's memory (a graph that saved it
// refuses its backward). Into a tensor that gradients flow through it is refused: its history
// cannot be rewritten, so the gradient would still go where the old value came from.
Variable copy_from(Variable& v, const py::object& src) {
  VIT_CHECK(!grad_enabled() || v.is_leaf() || !v.requires_grad(), "copy_",
            "the tensor was made by {} and gradients flow through it: an in-place copy would not reach them "
            "(copy into a leaf, or under vit.no_grad())",
            v.grad_fn());
  const Tensor s = tensor_of(src);
  VIT_CHECK(s.shape() == v.shape(), "copy_", "source {} but the tensor is {}", shape_str(s.shape()),
            shape_str(v.shape()));
  v.data().copy_(s);
  return v;
}

// t.T: the dimensions reversed.
Variable reversed(const Variable& v) {
  std::vector<int64_t> dims(v.shape().size());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(dims.size() - 1 - i);
  return v.permute(dims);
}

void bind_state(py::class_<Variable>& t) {
  t.def(py::init(&make_tensor), py::arg("data"), py::arg("requires_grad") = false)
      .def("numpy", [](const Variable& v) { return numpy_of(v.data()); })
      .def("tolist", [](const Variable& v) { return numpy_of(v.data()).attr("tolist")(); })
      .def_property_readonly("shape", [](const Variable& v) { return size_of(v.shape()); })
      .def("size", &size, py::arg("dim") = py::none())
      .def("dim", [](const Variable& v) { return v.shape().size(); })
      .def("numel", [](const Variable& v) { return v.data().numel(); })
      .def("item", &Variable::item)
      .def("__repr__", [](const Variable& v) { return v.to_string(); });
}

void bind_autograd(py::class_<Variable>& t) {
  t.def_property(
       "grad",
       [](const Variable& v) -> py::object {
         if (!v.grad().defined()) return py::none();
         return py::cast(Variable(v.grad()));
       },
       [](Variable& v, const py::object& g) {
         VIT_CHECK(g.is_none(), "grad", "only `.grad = None` is supported (it clears the gradient)");
         v.set_grad(Tensor());
       })
      .def_property_readonly("requires_grad", &Variable::requires_grad)
      .def(
          "requires_grad_",
          [](Variable& v, bool on) {
            v.requires_grad_(on);
            return v;
          },
          py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Variable::is_leaf)
      .def_property_readonly("_version", [](const Variable& v) { return v.data().version(); })
      // The engine tensor's identity (torch's _cdata): two Python objects for one parameter (a
      // layer hands out a new one each time) have the same.
      .def_property_readonly("_cdata", [](const Variable& v) { return reinterpret_cast<uintptr_t>(v.node().get()); })
      .def_property_readonly("grad_fn", [](const Variable& v) { return v.grad_fn(); })
      .def("backward", [](const Variable& v) { v.backward(); })
      .def("detach", &Variable::detach);
}

void bind_copies_and_views(py::class_<Variable>& t) {
  t.def("float", [](const Variable& v) { return v; })
      .def("clone", [](const Variable& v) { return v + 0.0; })
      .def("contiguous", &Variable::contiguous)
      .def("copy_", &copy_from, py::arg("src"))
      .def("reshape", [](const Variable& v, const py::args& a) { return v.reshape(sizes(a, "reshape")); })
      .def("view", [](const Variable& v, const py::args& a) { return v.reshape(sizes(a, "view")); })
      .def("permute", [](const Variable& v, const py::args& a) { return v.permute(sizes(a, "permute")); })
      .def("repeat", [](const Variable& v, const py::args& a) { return v.repeat(sizes(a, "repeat")); })
      .def("expand", [](const Variable& v, const py::args& a) { return v.expand(sizes(a, "expand")); })
      .def("transpose", &Variable::transpose, py::arg("dim0"), py::arg("dim1"))
      .def_property_readonly("T", &reversed)
      .def("unfold", &Variable::unfold, py::arg("dimension"), py::arg("size"), py::arg("step"))
      .def("flatten", &Variable::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("unsqueeze", &Variable::unsqueeze, py::arg("dim"))
      .def(
          "squeeze", [](const Variable& v, std::optional<int64_t> dim) { return dim ? v.squeeze(*dim) : v.squeeze(); },
          py::arg("dim") = py::none());
}

}  // namespace

void bind_tensor(py::class_<Variable>& tensor) {
  bind_state(tensor);
  bind_autograd(tensor);
  bind_copies_and_views(tensor);
}

}  // namespace vit::python
