// vit.nn.functional's compiled part: the engine's ops as functions (torch.nn.functional's names).
// vit/nn/functional.py is the public module: it sends class-index targets here and computes
// probability targets from these ops.
#include <pybind11/stl.h>

#include <cmath>
#include <optional>

#include "autograd/ops.h"
#include "convert.h"
#include "core/check.h"

namespace vit::python {
namespace {

// Class indices from Python as int64: integers as they are (a list, an integer numpy array);
// floats -- vit.tensor makes float32 -- only when each is a whole number, since 1.9 names no
// class and NaN no index (torch takes class indices as integers only).
Tensor class_indices(const py::handle& target) {
  Tensor values;
  if (py::isinstance<Variable>(target)) {
    values = target.cast<Variable>().data().to(DType::F64);
  } else {
    const py::object kind = py::module_::import("numpy").attr("asarray")(target).attr("dtype").attr("kind");
    VIT_CHECK(std::string(py::str(kind)) != "b", "cross_entropy",
              "class indices are integers, got booleans (True/False name no class)");
    values = tensor_of(target, DType::F64);
  }
  const std::vector<double> v = values.to_vector();
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    VIT_CHECK(std::isfinite(v[i]) && v[i] == std::floor(v[i]) && std::fabs(v[i]) < 9e15, "cross_entropy",
              "target {} at row {} is not a class index: class indices are whole numbers 0 <= k < classes (class "
              "probabilities are a target of the input's shape)",
              v[i], i);
    out[i] = static_cast<int64_t>(v[i]);
  }
  return Tensor::from_data(out, values.shape());
}

}  // namespace

void bind_functional(py::module_& f) {
  f.def(
      "cross_entropy",
      [](const Variable& logits, const py::object& targets) {
        return vit::cross_entropy(logits, class_indices(targets));
      },
      py::arg("input"), py::arg("target"));
  f.def(
      "softmax", [](const Variable& x, int64_t dim) { return vit::softmax(x, dim); }, py::arg("input"), py::arg("dim"));
  f.def(
      "log_softmax", [](const Variable& x, int64_t dim) { return x.log_softmax(dim); }, py::arg("input"),
      py::arg("dim"));
  f.def("gelu", [](const Variable& x) { return vit::gelu(x); });
  f.def("relu", [](const Variable& x) { return vit::relu(x); });
  f.def(
      "layer_norm",
      [](const Variable& x, const py::object& shape, std::optional<Variable> weight, std::optional<Variable> bias,
         double eps) {
        return vit::layer_norm(x, dims_of(shape, "layer_norm"), weight.value_or(Variable()), bias.value_or(Variable()),
                               eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5);
}

}  // namespace vit::python
