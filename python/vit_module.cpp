// The Python door: `import vit` (pybind11). A thin translation of <vit/vit.h> -- models load,
// predict and embed numpy arrays (zero-copy for C-contiguous float32 input; the GIL released while
// the model runs), images, quantization, training with the options of `vit train` as keywords and
// a per-epoch callback. The engine's tensors and autograd (vit.Tensor, vit.nn) are bound in
// engine_module.cpp. Errors are vit.Error (a RuntimeError) with the messages the `vit` command
// prints.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "vit/vit.h"

namespace vit::python {
void bind_engine(pybind11::module_& m);  // engine_module.cpp
}

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

// A batch of images as the model takes it: a float32 (used in place when C-contiguous) or float64
// numpy array. Anything else is refused by name: integer pixels (uint8 0..255) are not a normalised
// batch, and a list, bool, complex or object array is no image batch at all.
FloatArray images_of(const py::handle& x, const char* op) {
  if (!py::isinstance<py::array>(x)) {
    throw vit::Error(std::string("[") + op + "] the input is a " +
                     std::string(py::str(py::type::of(x).attr("__name__"))) +
                     ", not a numpy array: pass float32 (B, C, H, W) images (numpy.asarray(x, numpy.float32)); "
                     "Model.load_image decodes and preprocesses a file");
  }
  const auto a = py::reinterpret_borrow<py::array>(x);
  const py::dtype dtype = a.dtype();
  if (!dtype.is(py::dtype::of<float>()) && !dtype.is(py::dtype::of<double>())) {
    throw vit::Error(std::string("[") + op + "] the input is an array of " + std::string(py::str(py::object(dtype))) +
                     ", not float32: pass normalised float32 (B, C, H, W) images (raw pixels are not; "
                     "Model.load_image decodes and preprocesses a file as the checkpoint says)");
  }
  return FloatArray::ensure(a);
}

// A path from Python: refused when it holds a NUL character (the file system would read less).
const std::string& checked_path(const std::string& path, const char* op) {
  if (path.find('\0') != std::string::npos)
    throw vit::Error(std::string("[") + op + "] the path holds a NUL character: '" +
                     path.substr(0, path.find('\0')) + "\\0...'");
  return path;
}

// vit.train(**keywords): data="d", epochs=3, hflip=False, mean=[0.5] -> {"data", {"d"}}, {"epochs", {"3"}},
// {"hflip", {"false"}}, {"mean", {"0.5"}}: the facade's keyword form, checked by the training options' table
// (train/train_options.h), so a wrong name or value gets the same message as `vit train`. None: not given.
std::vector<vit::TrainOption> train_options(const py::kwargs& kwargs) {
  auto text = [](const py::handle& v, const std::string& key) -> std::string {
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
    if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::isinstance<py::str>(v))
      return py::str(v);
    throw vit::Error("[train] " + key + ": takes a number, a string or True/False, got a " +
                     std::string(py::str(py::type::of(v).attr("__name__"))));
  };
  std::vector<vit::TrainOption> options;
  for (const auto& [k, v] : kwargs) {
    const std::string key = py::str(k);
    if (v.is_none()) continue;
    vit::TrainOption o{key, {}};
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      for (const auto& item : v) o.values.push_back(text(item, key));
    } else {
      o.values.push_back(text(v, key));
    }
    options.push_back(std::move(o));
  }
  return options;
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

}  // namespace

PYBIND11_MODULE(vit, m) {
  m.doc() = "vit: Vision Transformers in C++ -- load, run, embed, quantize and train ViTs from Python";
  py::register_exception<vit::Error>(m, "Error", PyExc_RuntimeError);
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
  m.attr("__version__") = vit::version();
  m.def("set_num_threads", &vit::set_num_threads, py::arg("threads"),
        "Threads for every following call (0: all cores).");
  m.def("num_threads", &vit::num_threads, "The threads the next call will use.");

  py::class_<vit::Model>(m, "Model", "A loaded checkpoint (vit.load).")
      .def(
          "predict",
          [](const vit::Model& self, const py::object& input) {
            const FloatArray x = images_of(input, "predict");
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
          [](const vit::Model& self, const py::object& input, std::optional<std::string> pool) {
            const FloatArray x = images_of(input, "embed");
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
              const std::vector<float> image = self.load_image(checked_path(path, "image"));
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
            return to_numpy(self.load_image(checked_path(path, "image")),
                            {self.in_channels(), self.image_size(), self.image_size()});
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
      .def_property_readonly("weights", &vit::Model::weights)
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
         bool ema, bool raw, std::optional<int64_t> resize, std::optional<int64_t> crop, std::optional<std::string> interpolation,
         std::optional<std::vector<double>> mean, std::optional<std::vector<double>> std, const std::string& precision) {
        vit::LoadOptions o = load_options(heads, layout, eps, act, image_size, strict, ema);
        o.raw = raw;
        o.resize = resize.value_or(0);
        o.crop = crop.value_or(-1);
        o.interpolation = interpolation.value_or("");
        o.mean = mean.value_or(std::vector<double>{});
        o.std = std.value_or(std::vector<double>{});
        o.precision = precision;
        checked_path(path, "load");
        py::gil_scoped_release release;
        return vit::Model::load(path, o);
      },
      py::arg("path"), py::arg("heads") = py::none(), py::arg("layout") = py::none(), py::arg("eps") = py::none(),
      py::arg("act") = py::none(), py::arg("image_size") = py::none(), py::arg("strict") = true,
      py::arg("ema") = false, py::arg("raw") = false, py::arg("resize") = py::none(), py::arg("crop") = py::none(),
      py::arg("interpolation") = py::none(), py::arg("mean") = py::none(), py::arg("std") = py::none(),
      py::arg("precision") = "fp32",
      "Load any checkpoint vit reads (ours, int8, timm, torchvision, Hugging Face; DeiT, DINOv2, CLIP, ...); "
      "resize/crop/interpolation/mean/std override its preprocessing as vit predict's flags do.");

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
        const std::vector<vit::TrainOption> options = train_options(kwargs);
        std::function<bool(const vit::EpochReport&)> callback;
        if (!on_epoch.is_none() && !PyCallable_Check(on_epoch.ptr())) {
          throw vit::Error("[train] on_epoch must be a function (called with each epoch's report), got a " +
                           std::string(py::str(py::type::of(on_epoch).attr("__name__"))));
        }
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
          r = vit::train_keywords(options, callback);
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

  // ---- the engine's tensors and autograd (engine_module.cpp) ----
  vit::python::bind_engine(m);
}
