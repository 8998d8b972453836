// vit.optim's compiled part: the engine's optimisers (optim/optimizer.h) over a list of tensors,
// with torch.optim's semantics: weight decay applies to every parameter given (the `vit train`
// convention of sparing biases, norms and embeddings is the trainer's, not the optimiser's), and
// a tensor given twice is refused rather than stepped twice.
#include <pybind11/stl.h>

#include "convert.h"
#include "core/check.h"
#include "optim/optimizer.h"

namespace vit::python {
namespace {

// The parameters from any iterable of tensors (a list, a module's parameters()), named by their
// positions.
optim::NamedParameters parameters_of(const py::handle& params) {
  VIT_CHECK(py::isinstance<py::iterable>(params) && !py::isinstance<py::str>(params), "optimizer",
            "params must be tensors (a list, or a module's parameters()), got {}", type_name(params));
  optim::NamedParameters out;
  for (const py::handle& p : params) {
    VIT_CHECK(!py::isinstance<py::dict>(p), "optimizer",
              "parameter groups (dicts) are not supported: pass the tensors, with one lr and weight_decay for all");
    VIT_CHECK(py::isinstance<Variable>(p), "optimizer", "params must be tensors, got {} at position {}", type_name(p),
              out.size());
    out.emplace_back(std::to_string(out.size()), p.cast<Variable>());
  }
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
      py::init([](const py::object& params, double lr, double momentum, double weight_decay) {
        return decaying_all(std::make_unique<optim::SGD>(parameters_of(params), lr, momentum, weight_decay));
      }),
      py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0);
  py::class_<optim::AdamW, optim::Optimizer>(m, "AdamW")
      .def(py::init([](const py::object& params, double lr, std::pair<double, double> betas, double eps,
                       double weight_decay) {
             return decaying_all(std::make_unique<optim::AdamW>(parameters_of(params), lr, weight_decay, betas.first,
                                                                betas.second, eps));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>{0.9, 0.999},
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01);
}

}  // namespace vit::python
