// What every engine layer has in Python (torch.nn.Module's names): __call__ / forward,
// named_parameters, parameters, train, eval, training, zero_grad. Used by layers.cpp and
// transformer.cpp.
#pragma once

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "convert.h"
#include "nn/module.h"

namespace vit::python {

// A layer's parameters as (name, Tensor) pairs, with a prefix (as torch's named_parameters).
inline std::vector<std::pair<std::string, Variable>> named_parameters(const nn::Module& m, const std::string& prefix) {
  std::vector<std::pair<std::string, Variable>> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace_back(prefix + name, p);
  return out;
}

template <class Layer>
using LayerClass = py::class_<Layer, std::shared_ptr<Layer>>;

template <class Layer>
void bind_module_methods(LayerClass<Layer>& c) {
  c.def("__call__", [](Layer& l, const Variable& x) { return l.forward(x); })
      .def("forward", [](Layer& l, const Variable& x) { return l.forward(x); })
      .def(
          "named_parameters", [](const Layer& l, const std::string& prefix) { return named_parameters(l, prefix); },
          py::arg("prefix") = "")
      .def("parameters", [](const Layer& l) { return l.parameters(); })
      .def(
          "train",
          [](py::object self, bool on) {
            self.cast<Layer&>().train(on);
            return self;
          },
          py::arg("mode") = true)
      .def("eval",
           [](py::object self) {
             self.cast<Layer&>().eval();
             return self;
           })
      .def_property_readonly("training", [](const Layer& l) { return l.is_training(); })
      .def("zero_grad", [](Layer& l) { l.zero_grad(); });
}

// A layer's optional tensor (a bias, an affine weight) as a Tensor or None.
inline py::object optional_tensor(const Variable& v) { return v.defined() ? py::cast(v) : py::none(); }

}  // namespace vit::python
