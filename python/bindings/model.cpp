// The facade's door: vit.load, vit.Model (predict, embed, images, properties) and vit.quantize --
// a thin translation of <vit/vit.h>. Models take numpy arrays (zero-copy for C-contiguous float32
// input) and release the GIL while they run. Errors are vit.Error with the messages the `vit`
// command prints.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>

#include "convert.h"
#include "vit/vit.h"

namespace vit::python {
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
    throw vit::Error(std::string("[") + op + "] the input is a " + type_name(x) +
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
    throw vit::Error(std::string("[") + op + "] the path holds a NUL character: '" + path.substr(0, path.find('\0')) +
                     "\\0...'");
  return path;
}

py::array_t<float> predict(const vit::Model& self, const py::object& input) {
  const FloatArray x = images_of(input, "predict");
  const std::vector<int64_t> shape = shape_of(x);
  std::vector<float> logits;
  {
    py::gil_scoped_release release;
    logits = self.predict(x.data(), shape);
  }
  return to_numpy(std::move(logits), {shape[0], self.num_classes()});
}

py::array_t<float> embed(const vit::Model& self, const py::object& input, std::optional<std::string> pool) {
  const FloatArray x = images_of(input, "embed");
  const std::string pooling = pool.value_or("");
  const std::vector<int64_t> in_shape = shape_of(x);
  std::vector<float> out;
  {
    py::gil_scoped_release release;
    out = self.embed(x.data(), in_shape, pooling);
  }
  return to_numpy(std::move(out), self.embed_shape(in_shape[0], pooling));
}

// Image files -> for each, the top_k classes as [{index, label, probability}, ...].
py::list predict_images(const vit::Model& self, const std::vector<std::string>& paths, int64_t top_k) {
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
}

void bind_model_class(py::module_& m) {
  py::class_<vit::Model>(m, "Model", "A loaded checkpoint (vit.load).")
      .def("predict", &predict, py::arg("images"), "float32 (B, C, H, W) -> logits (B, K)")
      .def("embed", &embed, py::arg("images"), py::arg("pool") = py::none(),
           "float32 (B, C, H, W) -> embeddings (B, E) (pool 'cls'/'avg'; CLIP: projected) or (B, N, D) ('tokens')")
      .def("predict_images", &predict_images, py::arg("paths"), py::arg("top_k") = 5,
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
      .def_property_readonly(
          "config",
          [](const vit::Model& self) { return py::module_::import("json").attr("loads")(self.config_json()); })
      .def("__repr__", [](const vit::Model& self) {
        return "<vit.Model " + self.family() + " (" + self.layout() + " layout), " + std::to_string(self.image_size()) +
               "px, " + std::to_string(self.num_classes()) + " outputs>";
      });
}

// vit.load(path, **keywords): the load options of `vit predict` as keywords (heads=4, strict=False,
// mean=[0.5]), read by the one table of load options (<vit/load_options.h>).
vit::Model load(const std::string& path, const py::kwargs& kwargs) {
  const vit::LoadOptions o = vit::load_options_of(keywords_of(kwargs, "load"));
  checked_path(path, "load");
  py::gil_scoped_release release;
  return vit::Model::load(path, o);
}

py::dict quantize(const std::string& in, const std::string& out, bool overwrite, const py::kwargs& kwargs) {
  const vit::LoadOptions o = vit::load_options_of(keywords_of(kwargs, "load"));
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
}

py::dict export_onnx(const std::string& in, const std::string& out, int64_t opset, const std::string& precision,
                     bool overwrite, const py::kwargs& kwargs) {
  const vit::LoadOptions o = vit::load_options_of(keywords_of(kwargs, "load"));
  vit::ExportReport r;
  {
    py::gil_scoped_release release;
    r = vit::export_onnx(in, out, o, opset, precision, overwrite);
  }
  py::dict d;
  d["outputs"] = r.outputs;
  d["precision"] = r.precision;
  d["nodes"] = r.nodes;
  d["bytes"] = r.bytes;
  return d;
}

}  // namespace

void bind_model(py::module_& m) {
  bind_model_class(m);
  m.def("load", &load, py::arg("path"),
        "Load any checkpoint vit reads (ours, int8, timm, torchvision, Hugging Face; DeiT, DINOv2, CLIP, ...). "
        "Keywords are vit predict's load flags with '_' for '-' (heads=4, layout='timm', strict=False, ema=True, "
        "resize=256, mean=[0.5], precision='bf16', ...), checked as the flags are.");
  m.def("quantize", &quantize, py::arg("checkpoint"), py::arg("out"), py::arg("overwrite") = false,
        "Write an int8 copy of a checkpoint (vit quantize); keywords as vit.load's (heads=4, layout='timm').");
  m.def("export", &export_onnx, py::arg("checkpoint"), py::arg("out"), py::arg("opset") = 17,
        py::arg("precision") = "float32", py::arg("overwrite") = false,
        "Write the model as ONNX (vit export): input 'input' (batch, C, H, W), outputs 'logits' and 'embedding', "
        "class names and preprocessing in its metadata; opset 13-17; precision 'float32' or 'int8'. Keywords as "
        "vit.load's. Any file vit.load reads may be the checkpoint, .onnx files included.");
}

}  // namespace vit::python
