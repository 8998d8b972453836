// What the binding files share: Python objects <-> the engine's tensors (numbers, nested lists,
// numpy arrays, vit.Tensor), torch-style size and dim arguments, the generator every random
// tensor and layer initialisation draws from, and the registration function of each file.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/layers.h"
#include "vit/vit.h"

namespace vit::python {

namespace py = pybind11;

// The generator of vit.rand/randn, vit.manual_seed and the layers' initialisation.
nn::GeneratorPtr& generator();

// A Python number, nested list, numpy array or vit.Tensor as a float32 (or `dtype`) tensor, a copy.
Tensor tensor_of(const py::handle& data, DType dtype = DType::F32);
Variable make_tensor(const py::handle& data, bool requires_grad);
// A float32 numpy array with a copy of t's values.
py::array_t<float> numpy_of(const Tensor& t);
// A shape as vit.Size (a tuple).
py::object size_of(const Shape& shape);
// Sizes as torch takes them: f(2, 3), f([2, 3]) or f((2, 3)).
Shape sizes(const py::args& args, const char* op);
// dim=None (all), an int, or a list/tuple of ints.
std::vector<int64_t> dims_of(const py::object& dim, const char* op);
// An integer argument (a Python or numpy integer; not a bool, float or str), or vit.Error
// "[op] what must be an integer, got float" (never pybind11's "Unable to cast ...").
int64_t integer_of(const py::handle& v, const char* op, const std::string& what);
// A number argument (int or float, numpy's too; not a bool or str), or vit.Error naming it.
double real_of(const py::handle& v, const char* op, const std::string& what);
// The name of a Python object's type ("int", "list", "Tensor").
std::string type_name(const py::handle& o);
// A Python number (or numpy scalar) as a double; vit.Error when it does not fit one (10**400).
double number_of(const py::handle& o);
// A numpy array or numpy scalar of numbers (integers or floats; not bool, complex, str, object).
bool is_numpy_number(const py::handle& o);

// Keyword arguments as the facade's keywords, values as text: data="d", epochs=3, hflip=False,
// mean=[0.5] -> {"data", {"d"}}, {"epochs", {"3"}}, {"hflip", {"false"}}, {"mean", {"0.5"}}; None:
// not given. What vit.train and vit.load pass to the options' one table (op names it in messages).
std::vector<vit::Keyword> keywords_of(const py::kwargs& kwargs, const char* op);

// ---- one per file: each adds its part of the module ----
void bind_model(py::module_& m);                      // model.cpp: vit.load, Model, quantize
void bind_train(py::module_& m);                      // train.cpp: vit.train
void bind_tensor(py::class_<Variable>& tensor);       // tensor.cpp: vit.Tensor's state and views
void bind_tensor_math(py::class_<Variable>& tensor);  // tensor_math.cpp: reductions, operators
void bind_indexing(py::class_<Variable>& tensor);     // indexing.cpp: t[...], len(t)
void bind_creation(py::module_& m);                   // creation.cpp: vit.tensor, zeros, cat, ...
void bind_layers(py::module_& nn);                    // layers.cpp: Linear, Conv2d, LayerNorm, ...
void bind_transformer(py::module_& nn);               // transformer.cpp: PatchEmbed ... VisionTransformer
void bind_functional(py::module_& functional);        // functional.cpp: nn.functional's ops
void bind_optim(py::module_& optim);                  // optim.cpp: SGD, AdamW

}  // namespace vit::python
