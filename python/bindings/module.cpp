// vit._C: the compiled part of the Python package `vit` (python/vit/), built with pybind11. Each
// file binds one concern: model.cpp the facade's models (vit.load, quantize), train.cpp vit.train,
// tensor.cpp / tensor_math.cpp / indexing.cpp / creation.cpp vit.Tensor and the functions making
// tensors, layers.cpp / transformer.cpp the engine's layers (vit.nn), functional.cpp
// vit.nn.functional, optim.cpp vit.optim. The package's .py files put them under their public
// names and hold what is Python's by nature (nn.Module). Errors are vit.Error (a RuntimeError)
// with the engine's "[op] ..." messages.
#include <pybind11/pybind11.h>

#include "convert.h"
#include "vit/vit.h"

namespace py = pybind11;

namespace {

// Classes defined in `scope` print and pickle under `public_name` (vit.Tensor, vit.nn.Linear),
// where the package exposes them, rather than under vit._C: pybind11 names a class after its
// scope's __module__ when the scope has one.
py::module_ public_scope(py::module_ scope, const char* public_name) {
  scope.attr("__module__") = public_name;
  return scope;
}

void register_errors(py::module_& m) {
  py::register_exception<vit::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("Error").attr("__module__") = "vit";
  // Ctrl-C (or SIGTERM) during vit.train: the run saved its checkpoint and stopped; Python sees a
  // KeyboardInterrupt (not a vit.Error that `except Exception` would swallow), with Python's advice.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vit::Interrupted& e) {
      const std::string message = std::string(e.what()) + "; continue with vit.train(resume='" + e.run_dir() + "')";
      PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  using namespace vit::python;
  m.doc() = "vit's compiled part (the package `vit` exposes it): models, training, tensors and layers";
  public_scope(m, "vit");
  register_errors(m);
  m.attr("__version__") = vit::version();
  m.def("set_num_threads", &vit::set_num_threads, py::arg("threads"),
        "Threads for every following call (0: all cores).");
  m.def("num_threads", &vit::num_threads, "The threads the next call will use.");
  bind_model(m);
  bind_train(m);

  py::class_<vit::Variable> tensor(m, "Tensor", "A float32 tensor with reverse-mode autograd (the engine's Variable).");
  bind_tensor(tensor);
  bind_tensor_math(tensor);
  bind_indexing(tensor);
  bind_creation(m);

  py::module_ nn = public_scope(m.def_submodule("nn", "The engine's layers (torch's names)."), "vit.nn");
  bind_layers(nn);
  bind_transformer(nn);
  py::module_ functional = public_scope(m.def_submodule("functional", "The engine's ops."), "vit.nn.functional");
  bind_functional(functional);
  py::module_ optim = public_scope(m.def_submodule("optim", "The engine's optimisers."), "vit.optim");
  bind_optim(optim);
}
