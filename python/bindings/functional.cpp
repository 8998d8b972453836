// vit.nn.functional's compiled part: the engine's ops as functions (torch.nn.functional's names).
#include <pybind11/stl.h>

#include <optional>

#include "autograd/ops.h"
#include "convert.h"

namespace vit::python {

void bind_functional(py::module_& f) {
  f.def(
      "cross_entropy",
      [](const Variable& logits, const py::object& targets) {
        const Tensor t = tensor_of(targets).to(DType::I64);
        return vit::cross_entropy(logits, t);
      },
      py::arg("input"), py::arg("target"));
  f.def(
      "softmax", [](const Variable& x, int64_t dim) { return vit::softmax(x, dim); }, py::arg("input"), py::arg("dim"));
  f.def("gelu", [](const Variable& x) { return vit::gelu(x); });
  f.def("relu", [](const Variable& x) { return vit::relu(x); });
  f.def(
      "layer_norm",
      [](const Variable& x, const py::object& shape, std::optional<Variable> weight, std::optional<Variable> bias,
         double eps) {
        return vit::layer_norm(x, dims_of(shape), weight.value_or(Variable()), bias.value_or(Variable()), eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5);
}

}  // namespace vit::python
