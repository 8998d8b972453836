// vit.nn's basic layers, the engine's own (nn/layers.h) under torch's names and arguments:
// Linear, Conv2d, LayerNorm, Dropout, GELU, ReLU, Tanh, Softmax. Their weights are initialised
// from vit.manual_seed's generator.
#include "nn/layers.h"

#include <fmt/ranges.h>

#include "core/check.h"
#include "layer.h"

namespace vit::python {
namespace {

using nn::Conv2d;
using nn::LayerNorm;
using nn::Linear;

void bind_linear(py::module_& m) {
  LayerClass<Linear> c(m, "Linear");
  c.def(py::init(
            [](int64_t in, int64_t out, bool bias) { return std::make_shared<Linear>(in, out, bias, *generator()); }),
        py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("in_features", &Linear::in_features)
      .def_readonly("out_features", &Linear::out_features)
      .def_property_readonly("weight", [](const Linear& l) { return l.weight; })
      .def_property_readonly("bias", [](const Linear& l) { return optional_tensor(l.bias); })
      .def("__repr__", [](const Linear& l) {
        return fmt::format("Linear(in_features={}, out_features={}, bias={})", l.in_features, l.out_features,
                           l.bias.defined() ? "True" : "False");
      });
  bind_module_methods(c);
}

void bind_conv2d(py::module_& m) {
  LayerClass<Conv2d> c(m, "Conv2d");
  c.def(py::init([](int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias) {
          return std::make_shared<Conv2d>(in, out, kernel, stride, padding, bias, *generator());
        }),
        py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("bias") = true)
      .def_property_readonly("weight", [](const Conv2d& l) { return l.weight; })
      .def_property_readonly("bias", [](const Conv2d& l) { return optional_tensor(l.bias); })
      .def("__repr__", [](const Conv2d& l) {
        return fmt::format("Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {}){})", l.in_channels, l.out_channels,
                           l.kernel_size, l.kernel_size, l.stride, l.stride,
                           l.padding > 0 ? fmt::format(", padding=({}, {})", l.padding, l.padding) : "");
      });
  bind_module_methods(c);
}

void bind_layer_norm(py::module_& m) {
  LayerClass<LayerNorm> c(m, "LayerNorm");
  c.def(py::init([](const py::object& shape, double eps, bool affine) {
          return std::make_shared<LayerNorm>(dims_of(shape, "LayerNorm"), eps, affine);
        }),
        py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def_property_readonly("weight", [](const LayerNorm& l) { return optional_tensor(l.weight); })
      .def_property_readonly("bias", [](const LayerNorm& l) { return optional_tensor(l.bias); })
      .def("__repr__", [](const LayerNorm& l) {
        return fmt::format("LayerNorm(({}{}), eps={:g}, elementwise_affine={})", fmt::join(l.normalized_shape, ", "),
                           l.normalized_shape.size() == 1 ? "," : "", l.eps, l.weight.defined() ? "True" : "False");
      });
  bind_module_methods(c);
}

// A layer without arguments (ReLU, Tanh) that prints as its name.
template <class Layer>
void bind_plain(py::module_& m, const char* name) {
  LayerClass<Layer> c(m, name);
  c.def(py::init([] { return std::make_shared<Layer>(); })).def("__repr__", [name](const Layer&) {
    return std::string(name) + "()";
  });
  bind_module_methods(c);
}

void bind_activations(py::module_& m) {
  LayerClass<nn::Dropout> dropout(m, "Dropout");
  dropout.def(py::init([](double p) { return std::make_shared<nn::Dropout>(p, generator()); }), py::arg("p") = 0.5)
      .def("__repr__", [](const nn::Dropout&) { return std::string("Dropout()"); });
  bind_module_methods(dropout);
  LayerClass<nn::GELU> gelu(m, "GELU");
  gelu.def(py::init([](const std::string& approximate) {
             VIT_CHECK(approximate == "none" || approximate == "tanh", "GELU",
                       "approximate must be 'none' or 'tanh', got '{}'", approximate);
             return std::make_shared<nn::GELU>(approximate == "tanh");
           }),
           py::arg("approximate") = "none")
      .def("__repr__", [](const nn::GELU&) { return std::string("GELU()"); });
  bind_module_methods(gelu);
  bind_plain<nn::ReLU>(m, "ReLU");
  bind_plain<nn::Tanh>(m, "Tanh");
  LayerClass<nn::Softmax> softmax(m, "Softmax");
  softmax.def(py::init([](int64_t dim) { return std::make_shared<nn::Softmax>(dim); }), py::arg("dim"));
  bind_module_methods(softmax);
}

}  // namespace

void bind_layers(py::module_& nn) {
  bind_linear(nn);
  bind_conv2d(nn);
  bind_layer_norm(nn);
  bind_activations(nn);
}

}  // namespace vit::python
