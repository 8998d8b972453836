// The engine's door in Python, in PyTorch's words so the seed notebooks read the same on it:
//   vit.Tensor (the engine's Variable: float32 with reverse-mode autograd) and the functions that
//   make and combine tensors (tensor, arange, ones, zeros, rand, randn, manual_seed, cat, stack,
//   no_grad, ...); vit.nn (Module for Python classes to subclass, Parameter, Sequential,
//   ModuleList, and the engine's layers: Linear, Conv2d, LayerNorm, Dropout, GELU, ReLU, Tanh,
//   Softmax, PatchEmbed, MultiHeadSelfAttention, EncoderBlock, VisionTransformer; nn.functional);
//   vit.optim (SGD, AdamW). Every operation is the C++ op the CLI trains with (autograd/ops.h,
//   nn/); the bookkeeping that is Python's by nature (a Module finding its parameters through
//   its attributes, as torch.nn.Module does) is a few lines of Python run at import. Errors are
//   vit.Error with the engine's "[op] ..." messages. Separate from the facade (vit_module.cpp):
//   this file speaks the engine's types, that one only <vit/vit.h>'s.
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/eval.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "autograd/ops.h"
#include "core/check.h"
#include "model/vision_transformer.h"
#include "nn/layers.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace py = pybind11;

namespace vit::python {
namespace {

using vit::Variable;

// The generator every random tensor and layer initialisation draws from (vit.manual_seed).
vit::nn::GeneratorPtr& generator() {
  static vit::nn::GeneratorPtr gen = std::make_shared<vit::Generator>(0);
  return gen;
}

vit::Tensor tensor_of_array(const py::array_t<double, py::array::c_style | py::array::forcecast>& a) {
  std::vector<double> values(a.data(), a.data() + a.size());
  const vit::Shape shape(a.shape(), a.shape() + a.ndim());
  return vit::Tensor::from_data(values, shape).to(vit::DType::F32);
}

// A Python number, nested list, numpy array or vit.Tensor as a float32 tensor.
vit::Tensor tensor_of(const py::handle& data) {
  if (py::isinstance<Variable>(data)) return data.cast<Variable>().data().clone();
  const py::object array = py::module_::import("numpy").attr("asarray")(data, "float64");
  return tensor_of_array(array.cast<py::array_t<double, py::array::c_style | py::array::forcecast>>());
}

Variable make_tensor(const py::handle& data, bool requires_grad) { return Variable(tensor_of(data), requires_grad); }

py::array_t<float> numpy_of(const vit::Tensor& t) {
  const vit::Tensor c = t.to(vit::DType::F32).contiguous();
  std::vector<py::ssize_t> dims(c.shape().begin(), c.shape().end());
  py::array_t<float> out(dims);
  if (c.numel() > 0) std::memcpy(out.mutable_data(), c.data<float>(), static_cast<size_t>(c.numel()) * 4);
  return out;
}

// Sizes as torch takes them: f(2, 3), f([2, 3]) or f((2, 3)).
vit::Shape sizes(const py::args& args, const char* op) {
  vit::Shape out;
  if (args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0]))) {
    for (const py::handle& v : args[0]) out.push_back(v.cast<int64_t>());
    return out;
  }
  for (const py::handle& v : args) {
    VIT_CHECK(py::isinstance<py::int_>(v), op, "sizes must be integers, got {}", std::string(py::str(v.get_type())));
    out.push_back(v.cast<int64_t>());
  }
  return out;
}

// dim=None (all), an int, or a list/tuple of ints.
std::vector<int64_t> dims_of(const py::object& dim) {
  if (dim.is_none()) return {};
  if (py::isinstance<py::int_>(dim)) return {dim.cast<int64_t>()};
  std::vector<int64_t> out;
  for (const py::handle& v : dim) out.push_back(v.cast<int64_t>());
  return out;
}

py::object size_of(const vit::Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return py::module_::import("vit").attr("Size")(t);
}

// The other operand of an arithmetic operator: a vit.Tensor, or a Python int / float (a 0-d
// tensor). Anything else: no value (the operator answers NotImplemented, and Python raises its
// TypeError "unsupported operand type(s) for *: 'vit.Tensor' and 'str'", as for torch tensors).
std::optional<Variable> operand(const py::object& o) {
  if (py::isinstance<Variable>(o)) return o.cast<Variable>();
  if (py::isinstance<py::bool_>(o) || !(py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)))
    return std::nullopt;
  return Variable(vit::Tensor::scalar(o.cast<double>()));
}

// a OP b for a Python operator, NotImplemented when b is not a number or a tensor.
template <class Op>
py::object binary(const Variable& a, const py::object& b, bool reflected, Op op) {
  const std::optional<Variable> other = operand(b);
  if (!other) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(reflected ? op(*other, a) : op(a, *other));
}

// t[i], t[a:b:s], t[i, a:b] ...: ints select (the dim goes), slices narrow; autograd flows through.
Variable index(const Variable& v, const py::object& key) {
  std::vector<py::object> items;
  if (py::isinstance<py::tuple>(key)) {
    for (const py::handle& k : key) items.push_back(py::reinterpret_borrow<py::object>(k));
  } else {
    items.push_back(key);
  }
  VIT_CHECK(items.size() <= v.shape().size(), "index", "{} indices for a tensor of {} dimensions", items.size(),
            v.shape().size());
  Variable out = v;
  int64_t dim = 0;
  for (const py::object& k : items) {
    const int64_t size = out.shape()[static_cast<size_t>(dim)];
    if (py::isinstance<py::int_>(k)) {
      int64_t i = k.cast<int64_t>();
      // IndexError (not vit.Error), so `for row in t:` ends as it does over any Python sequence.
      if (i < -size || i >= size) {
        throw py::index_error(
            fmt::format("[index] index {} is out of range for dimension {} of size {}", i, dim, size));
      }
      if (i < 0) i += size;
      out = out.select(dim, i);
    } else if (py::isinstance<py::slice>(k)) {
      py::ssize_t start = 0, stop = 0, step = 0, length = 0;
      VIT_CHECK(k.cast<py::slice>().compute(size, &start, &stop, &step, &length), "index", "bad slice");
      VIT_CHECK(step > 0, "index", "slices take a positive step, got {}", step);
      out = out.slice(dim, start, start + length * step - (length > 0 ? step - 1 : 0), step);
      ++dim;
    } else {
      fail("index", "indices are integers and slices (a[1], a[:, 0:2]), got {}", std::string(py::str(k.get_type())));
    }
  }
  return out;
}

// A layer's parameters as (name, Tensor) pairs, with a prefix (as torch's named_parameters).
std::vector<std::pair<std::string, Variable>> named_parameters(const vit::nn::Module& m, const std::string& prefix) {
  std::vector<std::pair<std::string, Variable>> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace_back(prefix + name, p);
  return out;
}

// Registers what every engine layer has: __call__/forward, named_parameters, parameters, train, eval.
template <class Layer, class Holder>
void common(py::class_<Layer, Holder>& c) {
  c.def("__call__", [](Layer& l, const Variable& x) { return l.forward(x); })
      .def("forward", [](Layer& l, const Variable& x) { return l.forward(x); })
      .def(
          "named_parameters", [](const Layer& l, const std::string& prefix) { return named_parameters(l, prefix); },
          py::arg("prefix") = "")
      .def("parameters", [](const Layer& l) { return l.parameters(); })
      .def(
          "train", [](py::object self, bool on) { self.cast<Layer&>().train(on); return self; },
          py::arg("mode") = true)
      .def("eval", [](py::object self) { self.cast<Layer&>().eval(); return self; })
      .def_property_readonly("training", [](const Layer& l) { return l.is_training(); })
      .def("zero_grad", [](Layer& l) { l.zero_grad(); });
}

// An optimiser over Python's parameter list (names: their positions).
vit::optim::NamedParameters numbered(const std::vector<Variable>& params) {
  vit::optim::NamedParameters out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}

// The parts of torch.nn.Module that are Python's by nature: finding parameters through a
// class's attributes (lists of modules included), train/eval, and the containers.
constexpr const char* kPythonParts = R"PY(
class Size(tuple):
    """A tensor's shape, as torch.Size prints it."""
    def __repr__(self):
        return "vit.Size(%s)" % list(self)


def _is_layer(v):
    return hasattr(v, "named_parameters") and hasattr(v, "train") and not isinstance(v, type)


class Module:
    """Subclass it as torch.nn.Module: parameters are found through the attributes (tensors that
    require grad, modules, and lists or tuples of modules), in the order they were set."""

    def __init__(self):
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(type(self).__name__ + " has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_children(self):
        for name, v in vars(self).items():
            if _is_layer(v):
                yield name, v
            elif isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    if _is_layer(item):
                        yield "%s.%d" % (name, i), item

    def children(self):
        return [m for _, m in self.named_children()]

    def named_parameters(self, prefix=""):
        seen = set()
        for name, v in vars(self).items():
            if isinstance(v, Tensor):
                if v.requires_grad and v.is_leaf and id(v) not in seen:
                    seen.add(id(v))
                    yield prefix + name, v
            elif _is_layer(v):
                yield from v.named_parameters(prefix + name + ".")
            elif isinstance(v, (list, tuple)):
                for i, item in enumerate(v):
                    if _is_layer(item):
                        yield from item.named_parameters("%s%s.%d." % (prefix, name, i))
                    elif isinstance(item, Tensor) and item.requires_grad and item.is_leaf:
                        yield "%s%s.%d" % (prefix, name, i), item

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for _, m in self.named_children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def __repr__(self):
        lines = [type(self).__name__ + "("]
        for name, m in self.named_children():
            lines.append("  (%s): %s" % (name, repr(m).replace("\n", "\n  ")))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        object.__setattr__(self, "_modules", list(modules))

    def named_children(self):
        for i, m in enumerate(self._modules):
            yield str(i), m

    def named_parameters(self, prefix=""):
        for i, m in enumerate(self._modules):
            yield from m.named_parameters("%s%d." % (prefix, i))

    def append(self, module):
        self._modules.append(module)
        return self

    def __getitem__(self, i):
        return self._modules[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)


class Sequential(ModuleList):
    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self._modules:
            x = m(x)
        return x


def Parameter(data, requires_grad=True):
    """A leaf tensor that requires grad (what torch.nn.Parameter marks)."""
    return Tensor(data, requires_grad=requires_grad)
)PY";

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<Variable>(m, "Tensor", "A float32 tensor with reverse-mode autograd (the engine's Variable).")
      .def(py::init(&make_tensor), py::arg("data"), py::arg("requires_grad") = false)
      .def("numpy", [](const Variable& v) { return numpy_of(v.data()); })
      .def("tolist", [](const Variable& v) { return numpy_of(v.data()).attr("tolist")(); })
      .def_property_readonly("shape", [](const Variable& v) { return size_of(v.shape()); })
      .def(
          "size",
          [](const Variable& v, std::optional<int64_t> dim) -> py::object {
            if (!dim) return size_of(v.shape());
            const auto n = static_cast<int64_t>(v.shape().size());
            VIT_CHECK(*dim >= -n && *dim < n, "size", "dimension {} out of range for {} dimensions", *dim, n);
            return py::int_(v.shape()[static_cast<size_t>(*dim < 0 ? *dim + n : *dim)]);
          },
          py::arg("dim") = py::none())
      .def("dim", [](const Variable& v) { return v.shape().size(); })
      .def("numel", [](const Variable& v) { return v.data().numel(); })
      .def_property(
          "grad",
          [](const Variable& v) -> py::object {
            if (!v.grad().defined()) return py::none();
            return py::cast(Variable(v.grad()));
          },
          [](Variable& v, const py::object& g) {
            VIT_CHECK(g.is_none(), "grad", "only `.grad = None` is supported (it clears the gradient)");
            v.set_grad(vit::Tensor());
          })
      .def_property_readonly("requires_grad", &Variable::requires_grad)
      .def(
          "requires_grad_", [](Variable& v, bool on) { v.requires_grad_(on); return v; }, py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Variable::is_leaf)
      .def_property_readonly("grad_fn", [](const Variable& v) { return v.grad_fn(); })
      .def("item", &Variable::item)
      .def("backward", [](const Variable& v) { v.backward(); })
      .def("detach", &Variable::detach)
      .def("float", [](const Variable& v) { return v; })
      .def("clone", [](const Variable& v) { return v + 0.0; })
      .def("contiguous", &Variable::contiguous)
      .def("copy_",
           [](Variable& v, const py::object& src) {
             const vit::Tensor s = tensor_of(src);
             VIT_CHECK(s.shape() == v.shape(), "copy_", "source {} but the tensor is {}", vit::shape_str(s.shape()),
                       vit::shape_str(v.shape()));
             v.data().copy_(s);
             return v;
           })
      .def("reshape", [](const Variable& v, const py::args& a) { return v.reshape(sizes(a, "reshape")); })
      .def("view", [](const Variable& v, const py::args& a) { return v.reshape(sizes(a, "view")); })
      .def("permute", [](const Variable& v, const py::args& a) { return v.permute(sizes(a, "permute")); })
      .def("repeat", [](const Variable& v, const py::args& a) { return v.repeat(sizes(a, "repeat")); })
      .def("expand", [](const Variable& v, const py::args& a) { return v.expand(sizes(a, "expand")); })
      .def("transpose", &Variable::transpose, py::arg("dim0"), py::arg("dim1"))
      .def_property_readonly("T",
                             [](const Variable& v) {
                               std::vector<int64_t> dims(v.shape().size());
                               for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(dims.size() - 1 - i);
                               return v.permute(dims);
                             })
      .def("unfold", &Variable::unfold, py::arg("dimension"), py::arg("size"), py::arg("step"))
      .def("flatten", &Variable::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("unsqueeze", &Variable::unsqueeze, py::arg("dim"))
      .def(
          "squeeze",
          [](const Variable& v, std::optional<int64_t> dim) { return dim ? v.squeeze(*dim) : v.squeeze(); },
          py::arg("dim") = py::none())
      .def(
          "sum", [](const Variable& v, const py::object& dim, bool keepdim) { return v.sum(dims_of(dim), keepdim); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "mean", [](const Variable& v, const py::object& dim, bool keepdim) { return v.mean(dims_of(dim), keepdim); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "var",
          [](const Variable& v, const py::object& dim, bool unbiased, bool keepdim) {
            return v.var(dims_of(dim), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "std",
          [](const Variable& v, const py::object& dim, bool unbiased, bool keepdim) {
            return v.std(dims_of(dim), unbiased, keepdim);
          },
          py::arg("dim") = py::none(), py::arg("unbiased") = true, py::arg("keepdim") = false)
      .def(
          "max", [](const Variable& v, int64_t dim, bool keepdim) { return v.max(dim, keepdim); }, py::arg("dim"),
          py::arg("keepdim") = false)
      .def(
          "argmax", [](const Variable& v, int64_t dim) { return Variable(v.argmax(dim).to(vit::DType::F32)); },
          py::arg("dim"))
      .def("exp", &Variable::exp)
      .def("log", &Variable::log)
      .def("sqrt", &Variable::sqrt)
      .def("tanh", &Variable::tanh)
      .def("relu", &Variable::relu)
      .def("sigmoid", &Variable::sigmoid)
      .def("softmax", &Variable::softmax, py::arg("dim"))
      .def("matmul", &Variable::matmul)
      .def("__getitem__", &index)
      .def("__len__", [](const Variable& v) { return v.shape().empty() ? 0 : v.shape()[0]; })
      .def("__neg__", [](const Variable& v) { return vit::neg(v); })
      .def("__pow__", [](const Variable& v, double e) { return v.pow(e); })
      .def("__add__", [](const Variable& a, const py::object& b) {
             return binary(a, b, false, [](const Variable& x, const Variable& y) { return x + y; });
           })
      .def("__radd__", [](const Variable& a, const py::object& b) {
             return binary(a, b, true, [](const Variable& x, const Variable& y) { return x + y; });
           })
      .def("__sub__", [](const Variable& a, const py::object& b) {
             return binary(a, b, false, [](const Variable& x, const Variable& y) { return x - y; });
           })
      .def("__rsub__", [](const Variable& a, const py::object& b) {
             return binary(a, b, true, [](const Variable& x, const Variable& y) { return x - y; });
           })
      .def("__mul__", [](const Variable& a, const py::object& b) {
             return binary(a, b, false, [](const Variable& x, const Variable& y) { return x * y; });
           })
      .def("__rmul__", [](const Variable& a, const py::object& b) {
             return binary(a, b, true, [](const Variable& x, const Variable& y) { return x * y; });
           })
      .def("__truediv__", [](const Variable& a, const py::object& b) {
             return binary(a, b, false, [](const Variable& x, const Variable& y) { return x / y; });
           })
      .def("__rtruediv__", [](const Variable& a, const py::object& b) {
             return binary(a, b, true, [](const Variable& x, const Variable& y) { return x / y; });
           })
      .def("__matmul__", [](const Variable& a, const Variable& b) { return a.matmul(b); })
      .def("__repr__", [](const Variable& v) { return v.to_string(); });

  // ---- making and combining tensors ----
  m.def("tensor", &make_tensor, py::arg("data"), py::arg("requires_grad") = false);
  m.def("manual_seed", [](uint64_t seed) { generator() = std::make_shared<vit::Generator>(seed); }, py::arg("seed"));
  m.def("zeros", [](const py::args& a) { return Variable(vit::Tensor::zeros(sizes(a, "zeros"))); });
  m.def("ones", [](const py::args& a) { return Variable(vit::Tensor::ones(sizes(a, "ones"))); });
  m.def("rand", [](const py::args& a) { return Variable(vit::Tensor::rand(sizes(a, "rand"), *generator())); });
  m.def("randn", [](const py::args& a) { return Variable(vit::Tensor::randn(sizes(a, "randn"), *generator())); });
  m.def(
      "arange",
      [](double a, std::optional<double> b, double step) {
        return Variable(b ? vit::Tensor::arange(a, *b, step) : vit::Tensor::arange(a));
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1.0);
  m.def(
      "cat", [](const std::vector<Variable>& xs, int64_t dim) { return vit::cat(xs, dim); }, py::arg("tensors"),
      py::arg("dim") = 0);
  m.def(
      "stack", [](const std::vector<Variable>& xs, int64_t dim) { return vit::stack(xs, dim); }, py::arg("tensors"),
      py::arg("dim") = 0);
  m.def("matmul", [](const Variable& a, const Variable& b) { return vit::matmul(a, b); });
  m.def(
      "softmax", [](const Variable& x, int64_t dim) { return vit::softmax(x, dim); }, py::arg("input"),
      py::arg("dim"));
  m.def("exp", [](const Variable& v) { return v.exp(); });
  m.def("sqrt", [](const Variable& v) { return v.sqrt(); });
  m.def("tanh", [](const Variable& v) { return v.tanh(); });
  struct NoGrad {
    std::optional<vit::NoGradGuard> guard;
  };
  py::class_<NoGrad>(m, "no_grad", "with vit.no_grad(): no graph is recorded (torch.no_grad)")
      .def(py::init<>())
      .def("__enter__", [](NoGrad& n) { n.guard.emplace(); })
      .def("__exit__", [](NoGrad& n, const py::args&) {
        n.guard.reset();
        return false;
      });

  // ---- vit.nn ----
  py::module_ nn = m.def_submodule("nn", "Layers of the engine (PyTorch's names), and Module for Python classes.");
  py::object globals = nn.attr("__dict__");
  globals["Tensor"] = m.attr("Tensor");
  py::exec(kPythonParts, globals);
  m.attr("Size") = nn.attr("Size");

  using vit::nn::Conv2d;
  using vit::nn::LayerNorm;
  using vit::nn::Linear;
  py::class_<Linear, std::shared_ptr<Linear>> linear(nn, "Linear");
  linear
      .def(py::init([](int64_t in, int64_t out, bool bias) { return std::make_shared<Linear>(in, out, bias, *generator()); }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("in_features", &Linear::in_features)
      .def_readonly("out_features", &Linear::out_features)
      .def_property_readonly("weight", [](const Linear& l) { return l.weight; })
      .def_property_readonly("bias",
                             [](const Linear& l) -> py::object {
                               return l.bias.defined() ? py::cast(l.bias) : py::none();
                             })
      .def("__repr__", [](const Linear& l) {
        return fmt::format("Linear(in_features={}, out_features={}, bias={})", l.in_features, l.out_features,
                           l.bias.defined() ? "True" : "False");
      });
  common(linear);

  py::class_<Conv2d, std::shared_ptr<Conv2d>> conv(nn, "Conv2d");
  conv.def(py::init([](int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias) {
             return std::make_shared<Conv2d>(in, out, kernel, stride, padding, bias, *generator());
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("bias") = true)
      .def_property_readonly("weight", [](const Conv2d& c) { return c.weight; })
      .def_property_readonly("bias",
                             [](const Conv2d& c) -> py::object {
                               return c.bias.defined() ? py::cast(c.bias) : py::none();
                             })
      .def("__repr__", [](const Conv2d& c) {
        return fmt::format("Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {}){})", c.in_channels, c.out_channels,
                           c.kernel_size, c.kernel_size, c.stride, c.stride,
                           c.padding > 0 ? fmt::format(", padding=({}, {})", c.padding, c.padding) : "");
      });
  common(conv);

  py::class_<LayerNorm, std::shared_ptr<LayerNorm>> layer_norm(nn, "LayerNorm");
  layer_norm
      .def(py::init([](const py::object& shape, double eps, bool affine) {
             return std::make_shared<LayerNorm>(dims_of(shape), eps, affine);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def_property_readonly("weight",
                             [](const LayerNorm& l) -> py::object {
                               return l.weight.defined() ? py::cast(l.weight) : py::none();
                             })
      .def_property_readonly("bias",
                             [](const LayerNorm& l) -> py::object {
                               return l.bias.defined() ? py::cast(l.bias) : py::none();
                             })
      .def("__repr__", [](const LayerNorm& l) {
        return fmt::format("LayerNorm(({}{}), eps={:g}, elementwise_affine={})", fmt::join(l.normalized_shape, ", "),
                           l.normalized_shape.size() == 1 ? "," : "", l.eps, l.weight.defined() ? "True" : "False");
      });
  common(layer_norm);

  py::class_<vit::nn::Dropout, std::shared_ptr<vit::nn::Dropout>> dropout(nn, "Dropout");
  dropout.def(py::init([](double p) { return std::make_shared<vit::nn::Dropout>(p, generator()); }),
              py::arg("p") = 0.5)
      .def("__repr__", [](const vit::nn::Dropout&) { return std::string("Dropout()"); });
  common(dropout);
  py::class_<vit::nn::GELU, std::shared_ptr<vit::nn::GELU>> gelu(nn, "GELU");
  gelu.def(py::init([](const std::string& approximate) {
             VIT_CHECK(approximate == "none" || approximate == "tanh", "GELU",
                       "approximate must be 'none' or 'tanh', got '{}'", approximate);
             return std::make_shared<vit::nn::GELU>(approximate == "tanh");
           }),
           py::arg("approximate") = "none")
      .def("__repr__", [](const vit::nn::GELU&) { return std::string("GELU()"); });
  common(gelu);
  py::class_<vit::nn::ReLU, std::shared_ptr<vit::nn::ReLU>> relu(nn, "ReLU");
  relu.def(py::init([] { return std::make_shared<vit::nn::ReLU>(); }))
      .def("__repr__", [](const vit::nn::ReLU&) { return std::string("ReLU()"); });
  common(relu);
  py::class_<vit::nn::Tanh, std::shared_ptr<vit::nn::Tanh>> tanh_layer(nn, "Tanh");
  tanh_layer.def(py::init([] { return std::make_shared<vit::nn::Tanh>(); }))
      .def("__repr__", [](const vit::nn::Tanh&) { return std::string("Tanh()"); });
  common(tanh_layer);
  py::class_<vit::nn::Softmax, std::shared_ptr<vit::nn::Softmax>> softmax(nn, "Softmax");
  softmax.def(py::init([](int64_t dim) { return std::make_shared<vit::nn::Softmax>(dim); }), py::arg("dim"));
  common(softmax);

  py::class_<vit::nn::PatchEmbed, std::shared_ptr<vit::nn::PatchEmbed>> patch(nn, "PatchEmbed");
  patch
      .def(py::init([](int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t embed_dim) {
             return std::make_shared<vit::nn::PatchEmbed>(img_size, patch_size, in_chans, embed_dim, *generator());
           }),
           py::arg("img_size"), py::arg("patch_size"), py::arg("in_chans"), py::arg("embed_dim"))
      .def_property_readonly("proj", [](const vit::nn::PatchEmbed& p) { return p.proj; });
  common(patch);
  py::class_<vit::nn::MultiHeadSelfAttention, std::shared_ptr<vit::nn::MultiHeadSelfAttention>> mhsa(
      nn, "MultiHeadSelfAttention");
  mhsa.def(py::init([](int64_t dim, int64_t num_heads, bool qkv_bias) {
             return std::make_shared<vit::nn::MultiHeadSelfAttention>(dim, num_heads, qkv_bias, 0.0, 0.0, generator());
           }),
           py::arg("dim"), py::arg("num_heads"), py::arg("qkv_bias") = true)
      .def_property_readonly("qkv", [](const vit::nn::MultiHeadSelfAttention& a) { return a.qkv; })
      .def_property_readonly("proj", [](const vit::nn::MultiHeadSelfAttention& a) { return a.proj; });
  common(mhsa);
  py::class_<vit::nn::EncoderBlock, std::shared_ptr<vit::nn::EncoderBlock>> block(nn, "EncoderBlock");
  block.def(py::init([](int64_t dim, int64_t num_heads, double mlp_ratio, bool qkv_bias, double eps) {
              vit::nn::EncoderBlockConfig c;
              c.dim = dim;
              c.num_heads = num_heads;
              c.mlp_ratio = mlp_ratio;
              c.qkv_bias = qkv_bias;
              c.eps = eps;
              return std::make_shared<vit::nn::EncoderBlock>(c, generator());
            }),
            py::arg("dim"), py::arg("num_heads"), py::arg("mlp_ratio") = 4.0, py::arg("qkv_bias") = true,
            py::arg("eps") = 1e-6);
  common(block);
  py::class_<vit::model::VisionTransformer, std::shared_ptr<vit::model::VisionTransformer>> model(nn,
                                                                                                   "VisionTransformer");
  model.def(py::init([](const std::string& preset, const py::kwargs& overrides) {
              vit::model::ViTConfig c = vit::model::preset(preset);
              for (const auto& [key, value] : overrides) {
                const std::string k = py::str(key);
                if (k == "image_size") c.image_size = value.cast<int64_t>();
                else if (k == "patch_size") c.patch_size = value.cast<int64_t>();
                else if (k == "in_channels") c.in_channels = value.cast<int64_t>();
                else if (k == "num_classes") c.num_classes = value.cast<int64_t>();
                else if (k == "dim") c.dim = value.cast<int64_t>();
                else if (k == "depth") c.depth = value.cast<int64_t>();
                else if (k == "num_heads") c.num_heads = value.cast<int64_t>();
                else if (k == "mlp_ratio") c.mlp_ratio = value.cast<double>();
                else if (k == "dropout") c.dropout = value.cast<double>();
                else fail("VisionTransformer", "unknown option '{}' (image_size, patch_size, in_channels, num_classes, "
                          "dim, depth, num_heads, mlp_ratio, dropout)", k);
              }
              c.validate();
              return std::make_shared<vit::model::VisionTransformer>(c, generator());
            }),
            py::arg("preset") = "vit_notebook");
  common(model);

  py::module_ functional = nn.def_submodule("functional", "Functions of the engine's ops (torch.nn.functional).");
  functional.def(
      "cross_entropy",
      [](const Variable& logits, const py::object& targets) {
        const vit::Tensor t = tensor_of(targets).to(vit::DType::I64);
        return vit::cross_entropy(logits, t);
      },
      py::arg("input"), py::arg("target"));
  functional.def(
      "softmax", [](const Variable& x, int64_t dim) { return vit::softmax(x, dim); }, py::arg("input"),
      py::arg("dim"));
  functional.def("gelu", [](const Variable& x) { return vit::gelu(x); });
  functional.def("relu", [](const Variable& x) { return vit::relu(x); });
  functional.def(
      "layer_norm",
      [](const Variable& x, const py::object& shape, std::optional<Variable> weight, std::optional<Variable> bias,
         double eps) {
        return vit::layer_norm(x, dims_of(shape), weight.value_or(Variable()), bias.value_or(Variable()), eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5);

  // ---- vit.optim ----
  py::module_ optim = m.def_submodule("optim", "The engine's optimisers over a module's parameters.");
  py::class_<vit::optim::Optimizer>(optim, "Optimizer")
      .def("step", &vit::optim::Optimizer::step)
      .def("zero_grad", &vit::optim::Optimizer::zero_grad)
      .def_readwrite("lr", &vit::optim::Optimizer::lr);
  py::class_<vit::optim::SGD, vit::optim::Optimizer>(optim, "SGD")
      .def(py::init([](const std::vector<Variable>& params, double lr, double momentum, double weight_decay) {
             return std::make_unique<vit::optim::SGD>(numbered(params), lr, momentum, weight_decay);
           }),
           py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0);
  py::class_<vit::optim::AdamW, vit::optim::Optimizer>(optim, "AdamW")
      .def(py::init([](const std::vector<Variable>& params, double lr, std::pair<double, double> betas, double eps,
                       double weight_decay) {
             return std::make_unique<vit::optim::AdamW>(numbered(params), lr, weight_decay, betas.first, betas.second,
                                                        eps);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>{0.9, 0.999},
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01);
}

}  // namespace vit::python
