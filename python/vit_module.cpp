// The Python door: `import vit` (pybind11). A thin translation of <vit/vit.h> -- models load,
// predict and embed numpy arrays (zero-copy for C-contiguous float32 input; the GIL released while
// the model runs), images, quantization, training with the flags of `vit train` and a per-epoch
// callback -- plus the engine's tensors and autograd (vit.Tensor, vit.nn.LayerNorm), so the seed
// notebooks' checks run as written. Errors are vit.Error (a RuntimeError) with the messages the
// `vit` command prints.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "autograd/ops.h"
#include "nn/layers.h"
#include "vit/vit.h"

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

// A numpy array that owns a std::vector's storage (no copy of the result).
py::array_t<float> to_numpy(std::vector<float>&& values, const std::vector<int64_t>& shape) {
  auto* owned = new std::vector<float>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array_t<float>(dims, owned->data(), free_when_done);
}

std::vector<int64_t> shape_of(const FloatArray& x) { return std::vector<int64_t>(x.shape(), x.shape() + x.ndim()); }

std::string flag_name(const std::string& key) {
  std::string name = "--" + key;
  for (char& c : name) c = c == '_' ? '-' : c;
  return name;
}

// vit.train(**flags): data="d", epochs=3, hflip=False -> --data d --epochs 3 --hflip=false (CLI11 takes a
// flag's value after "="; an explicit False turns off what a recipe turns on). None: not given.
std::vector<std::string> train_flags(const py::kwargs& kwargs) {
  std::vector<std::string> flags;
  for (const auto& [k, v] : kwargs) {
    const std::string name = flag_name(py::str(k));
    if (py::isinstance<py::bool_>(v)) {
      flags.push_back(name + (v.cast<bool>() ? "=true" : "=false"));
      continue;
    }
    if (v.is_none()) continue;
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      flags.push_back(name);
      for (const auto& item : v) flags.push_back(py::str(item));
      continue;
    }
    flags.push_back(name);
    flags.push_back(py::str(v));
  }
  return flags;
}

vit::LoadOptions load_options(std::optional<int64_t> heads, std::optional<std::string> layout,
                              std::optional<double> eps, std::optional<std::string> act,
                              std::optional<int64_t> image_size, bool strict, bool ema) {
  vit::LoadOptions o;
  o.heads = heads.value_or(0);
  o.layout = layout.value_or("");
  o.eps = eps.value_or(0.0);
  o.act = act.value_or("");
  o.image_size = image_size.value_or(0);
  o.strict = strict;
  o.ema = ema;
  return o;
}

// vit.Tensor: the engine's Variable (a tensor with autograd).
vit::Variable tensor_from(const py::array_t<double, py::array::c_style | py::array::forcecast>& a,
                          bool requires_grad) {
  std::vector<double> values(a.data(), a.data() + a.size());
  vit::Shape shape(a.shape(), a.shape() + a.ndim());
  vit::Tensor t = vit::Tensor::from_data(values, shape).to(vit::DType::F32);
  return vit::Variable(t, requires_grad);
}

py::array_t<double> numpy_of(const vit::Tensor& t) {
  std::vector<py::ssize_t> dims(t.shape().begin(), t.shape().end());
  py::array_t<double> out(dims);
  const std::vector<double> v = t.to_vector();
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

vit::Variable as_variable(const py::object& o) {
  if (py::isinstance<vit::Variable>(o)) return o.cast<vit::Variable>();
  return vit::Variable(vit::Tensor::scalar(o.cast<double>()));
}

}  // namespace

PYBIND11_MODULE(vit, m) {
  m.doc() = "vit: Vision Transformers in C++ -- load, run, embed, quantize and train ViTs from Python";
  py::register_exception<vit::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("__version__") = vit::version();
  m.def("set_num_threads", &vit::set_num_threads, py::arg("threads"),
        "Threads for every following call (0: all cores).");

  py::class_<vit::Model>(m, "Model", "A loaded checkpoint (vit.load).")
      .def(
          "predict",
          [](const vit::Model& self, const FloatArray& x) {
            const std::vector<int64_t> shape = shape_of(x);
            std::vector<float> logits;
            {
              py::gil_scoped_release release;
              logits = self.predict(x.data(), shape);
            }
            return to_numpy(std::move(logits), {shape[0], self.num_classes()});
          },
          py::arg("images"), "float32 (B, C, H, W) -> logits (B, K)")
      .def(
          "embed",
          [](const vit::Model& self, const FloatArray& x, std::optional<std::string> pool) {
            const std::string pooling = pool.value_or("");
            const std::vector<int64_t> in_shape = shape_of(x);
            std::vector<float> out;
            {
              py::gil_scoped_release release;
              out = self.embed(x.data(), in_shape, pooling);
            }
            return to_numpy(std::move(out), self.embed_shape(in_shape[0], pooling));
          },
          py::arg("images"), py::arg("pool") = py::none(),
          "float32 (B, C, H, W) -> embeddings (B, E) (pool 'cls'/'avg'; CLIP: projected) or (B, N, D) ('tokens')")
      .def(
          "predict_images",
          [](const vit::Model& self, const std::vector<std::string>& paths, int64_t top_k) {
            const int64_t S = self.image_size(), C = self.in_channels();
            std::vector<float> batch;
            batch.reserve(static_cast<size_t>(paths.size() * C * S * S));
            for (const auto& path : paths) {
              const std::vector<float> image = self.load_image(path);
              batch.insert(batch.end(), image.begin(), image.end());
            }
            std::vector<std::vector<vit::Prediction>> top;
            {
              py::gil_scoped_release release;
              top = self.top_k(self.predict(batch.data(), static_cast<int64_t>(paths.size())), top_k);
            }
            py::list out;
            for (const auto& row : top) {
              py::list predictions;
              for (const auto& p : row) {
                py::dict d;
                d["index"] = p.index;
                d["label"] = p.label;
                d["probability"] = p.probability;
                predictions.append(d);
              }
              out.append(predictions);
            }
            return out;
          },
          py::arg("paths"), py::arg("top_k") = 5,
          "image files -> for each, the top_k classes as dicts {index, label, probability}")
      .def(
          "load_image",
          [](const vit::Model& self, const std::string& path) {
            return to_numpy(self.load_image(path), {self.in_channels(), self.image_size(), self.image_size()});
          },
          py::arg("path"), "an image file, decoded and preprocessed as the checkpoint says: (C, H, W) float32")
      .def_property_readonly("image_size", &vit::Model::image_size)
      .def_property_readonly("in_channels", &vit::Model::in_channels)
      .def_property_readonly("num_classes", &vit::Model::num_classes)
      .def_property_readonly("embed_dim", &vit::Model::embed_dim)
      .def_property_readonly("has_classifier", &vit::Model::has_classifier)
      .def_property_readonly("class_names", &vit::Model::class_names)
      .def_property_readonly("layout", &vit::Model::layout)
      .def_property_readonly("family", &vit::Model::family)
      .def_property_readonly("skipped_keys", &vit::Model::skipped_keys)
      .def_property_readonly("config",
                             [](const vit::Model& self) {
                               return py::module_::import("json").attr("loads")(self.config_json());
                             })
      .def("__repr__", [](const vit::Model& self) {
        return "<vit.Model " + self.family() + " (" + self.layout() + " layout), " + std::to_string(self.image_size()) +
               "px, " + std::to_string(self.num_classes()) + " outputs>";
      });

  m.def(
      "load",
      [](const std::string& path, std::optional<int64_t> heads, std::optional<std::string> layout,
         std::optional<double> eps, std::optional<std::string> act, std::optional<int64_t> image_size, bool strict,
         bool ema) {
        const vit::LoadOptions o = load_options(heads, layout, eps, act, image_size, strict, ema);
        py::gil_scoped_release release;
        return vit::Model::load(path, o);
      },
      py::arg("path"), py::arg("heads") = py::none(), py::arg("layout") = py::none(), py::arg("eps") = py::none(),
      py::arg("act") = py::none(), py::arg("image_size") = py::none(), py::arg("strict") = true,
      py::arg("ema") = false,
      "Load any checkpoint vit reads (ours, int8, timm, torchvision, Hugging Face; DeiT, DINOv2, CLIP, ...).");

  m.def(
      "quantize",
      [](const std::string& in, const std::string& out, std::optional<int64_t> heads,
         std::optional<std::string> layout, bool overwrite) {
        const vit::LoadOptions o = load_options(heads, layout, std::nullopt, std::nullopt, std::nullopt, true, false);
        vit::QuantizeReport r;
        {
          py::gil_scoped_release release;
          r = vit::quantize(in, out, o, overwrite);
        }
        py::dict d;
        d["tensors"] = r.tensors;
        d["max_rel_rms_error"] = r.max_rel_rms_error;
        d["in_bytes"] = r.in_bytes;
        d["out_bytes"] = r.out_bytes;
        return d;
      },
      py::arg("checkpoint"), py::arg("out"), py::arg("heads") = py::none(), py::arg("layout") = py::none(),
      py::arg("overwrite") = false, "Write an int8 copy of a checkpoint (vit quantize).");

  m.def(
      "train",
      [](py::object on_epoch, py::kwargs kwargs) {
        const std::vector<std::string> flags = train_flags(kwargs);
        std::function<bool(const vit::EpochReport&)> callback;
        if (!on_epoch.is_none()) {
          callback = [on_epoch](const vit::EpochReport& e) {
            py::gil_scoped_acquire acquire;
            py::dict d;
            d["epoch"] = e.epoch;
            d["epochs"] = e.epochs;
            d["train_loss"] = e.train_loss;
            d["train_accuracy"] = e.train_accuracy;
            d["test_loss"] = e.test_loss;
            d["test_accuracy"] = e.test_accuracy;
            d["test_top5"] = e.test_top5;
            d["learning_rate"] = e.learning_rate;
            d["images_per_second"] = e.images_per_second;
            d["epoch_seconds"] = e.epoch_seconds;
            d["elapsed_seconds"] = e.elapsed_seconds;
            d["step"] = e.step;
            d["checkpoint"] = e.checkpoint;
            const py::object keep_going = on_epoch(d);
            return keep_going.is_none() || keep_going.cast<bool>();
          };
        }
        vit::TrainReport r;
        {
          py::gil_scoped_release release;
          r = vit::train_model(flags, callback);
        }
        py::dict d;
        d["epochs_run"] = r.epochs_run;
        d["final_test_accuracy"] = r.final_test_accuracy;
        d["best_test_accuracy"] = r.best_test_accuracy;
        d["seconds"] = r.seconds;
        return d;
      },
      py::arg("on_epoch") = py::none(),
      "Train with the flags of `vit train` as keywords (data='data/mnist', preset='vit_digits', epochs=3, "
      "out='runs/x', hflip=True, ...). on_epoch(dict) runs after each epoch's checkpoint; returning False stops "
      "the run there (resume=DIR continues it).");

  // ---- the engine's tensors and autograd ----
  py::class_<vit::Variable>(m, "Tensor", "A float32 tensor with reverse-mode autograd (the engine's Variable).")
      .def(py::init(&tensor_from), py::arg("data"), py::arg("requires_grad") = false)
      .def("numpy", [](const vit::Variable& v) { return numpy_of(v.data()); })
      .def_property_readonly("shape", [](const vit::Variable& v) { return v.shape(); })
      .def_property_readonly("grad",
                             [](const vit::Variable& v) -> py::object {
                               if (!v.grad().defined()) return py::none();
                               return numpy_of(v.grad());
                             })
      .def_property_readonly("requires_grad", &vit::Variable::requires_grad)
      .def_property_readonly("is_leaf", &vit::Variable::is_leaf)
      .def_property_readonly("grad_fn", [](const vit::Variable& v) { return v.grad_fn(); })
      .def("item", &vit::Variable::item)
      .def("backward", [](const vit::Variable& v) { v.backward(); })
      .def("reshape", &vit::Variable::reshape, py::arg("shape"))
      .def("permute", &vit::Variable::permute, py::arg("dims"))
      .def("transpose", &vit::Variable::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("unfold", &vit::Variable::unfold, py::arg("dim"), py::arg("size"), py::arg("step"))
      .def("flatten", &vit::Variable::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("sum", &vit::Variable::sum, py::arg("dims") = std::vector<int64_t>{}, py::arg("keepdim") = false)
      .def("mean", &vit::Variable::mean, py::arg("dims") = std::vector<int64_t>{}, py::arg("keepdim") = false)
      .def("std", &vit::Variable::std, py::arg("dims") = std::vector<int64_t>{}, py::arg("unbiased") = true,
           py::arg("keepdim") = false)
      .def("exp", &vit::Variable::exp)
      .def("tanh", &vit::Variable::tanh)
      .def("softmax", &vit::Variable::softmax, py::arg("dim"))
      .def("matmul", &vit::Variable::matmul)
      .def("__add__", [](const vit::Variable& a, const py::object& b) { return a + as_variable(b); })
      .def("__radd__", [](const vit::Variable& a, const py::object& b) { return as_variable(b) + a; })
      .def("__sub__", [](const vit::Variable& a, const py::object& b) { return a - as_variable(b); })
      .def("__rsub__", [](const vit::Variable& a, const py::object& b) { return as_variable(b) - a; })
      .def("__mul__", [](const vit::Variable& a, const py::object& b) { return a * as_variable(b); })
      .def("__rmul__", [](const vit::Variable& a, const py::object& b) { return as_variable(b) * a; })
      .def("__truediv__", [](const vit::Variable& a, const py::object& b) { return a / as_variable(b); })
      .def("__matmul__", [](const vit::Variable& a, const vit::Variable& b) { return a.matmul(b); })
      .def("__repr__", [](const vit::Variable& v) { return v.to_string(); });

  py::module_ nn = m.def_submodule("nn", "Layers of the engine (PyTorch's names).");
  py::class_<vit::nn::LayerNorm, std::shared_ptr<vit::nn::LayerNorm>>(nn, "LayerNorm")
      .def(py::init([](std::vector<int64_t> shape, double eps, bool affine) {
             return std::make_shared<vit::nn::LayerNorm>(vit::Shape(shape.begin(), shape.end()), eps, affine);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def("__call__", [](vit::nn::LayerNorm& ln, const vit::Variable& x) { return ln.forward(x); })
      .def_property_readonly("weight", [](const vit::nn::LayerNorm& ln) { return ln.weight; })
      .def_property_readonly("bias", [](const vit::nn::LayerNorm& ln) { return ln.bias; });
}
