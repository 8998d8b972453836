// vit.optim's compiled part: the engine's optimisers (optim/optimizer.h) over a list of tensors,
// with torch.optim's semantics: weight decay applies to every parameter given (the `vit train`
// convention of sparing biases, norms and embeddings is the trainer's, not the optimiser's).
#include <pybind11/stl.h>

#include "convert.h"
#include "optim/optimizer.h"

namespace vit::python {
namespace {

// An optimiser over Python's parameter list (names: their positions).
optim::NamedParameters numbered(const std::vector<Variable>& params) {
  optim::NamedParameters out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}

// torch.optim decays every parameter it is given.
template <class Optimizer>
std::unique_ptr<Optimizer> decaying_all(std::unique_ptr<Optimizer> optimizer) {
  optimizer->set_decayed(std::vector<bool>(optimizer->parameters().size(), true));
  return optimizer;
}

}  // namespace

void bind_optim(py::module_& m) {
  py::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_readwrite("lr", &optim::Optimizer::lr);
  py::class_<optim::SGD, optim::Optimizer>(m, "SGD").def(
      py::init([](const std::vector<Variable>& params, double lr, double momentum, double weight_decay) {
        return decaying_all(std::make_unique<optim::SGD>(numbered(params), lr, momentum, weight_decay));
      }),
      py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0);
  py::class_<optim::AdamW, optim::Optimizer>(m, "AdamW")
      .def(py::init([](const std::vector<Variable>& params, double lr, std::pair<double, double> betas, double eps,
                       double weight_decay) {
             return decaying_all(
                 std::make_unique<optim::AdamW>(numbered(params), lr, weight_decay, betas.first, betas.second, eps));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>{0.9, 0.999},
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01);
}

}  // namespace vit::python
