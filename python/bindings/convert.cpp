// Conversions between Python objects and the engine's tensors (see convert.h).
#include "convert.h"

#include <cstring>

#include "core/check.h"

namespace vit::python {

nn::GeneratorPtr& generator() {
  static nn::GeneratorPtr gen = std::make_shared<Generator>(0);
  return gen;
}

namespace {

Tensor tensor_of_array(const py::array_t<double, py::array::c_style | py::array::forcecast>& a, DType dtype) {
  std::vector<double> values(a.data(), a.data() + a.size());
  const Shape shape(a.shape(), a.shape() + a.ndim());
  return Tensor::from_data(values, shape).to(dtype);
}

}  // namespace

Tensor tensor_of(const py::handle& data, DType dtype) {
  if (py::isinstance<Variable>(data)) return data.cast<Variable>().data().to(dtype).clone();
  // numpy would read None as NaN and "1.5" as 1.5: neither is a number here.
  VIT_CHECK(!data.is_none() && !py::isinstance<py::str>(data) && !py::isinstance<py::bytes>(data), "tensor",
            "data must be numbers (a number, a nested list of numbers, a numpy array or a vit.Tensor), got {}",
            type_name(data));
  const py::object array = py::module_::import("numpy").attr("asarray")(data, "float64");
  return tensor_of_array(array.cast<py::array_t<double, py::array::c_style | py::array::forcecast>>(), dtype);
}

Variable make_tensor(const py::handle& data, bool requires_grad) { return Variable(tensor_of(data), requires_grad); }

py::array_t<float> numpy_of(const Tensor& t) {
  const Tensor c = t.to(DType::F32).contiguous();
  std::vector<py::ssize_t> dims(c.shape().begin(), c.shape().end());
  py::array_t<float> out(dims);
  if (c.numel() > 0) std::memcpy(out.mutable_data(), c.data<float>(), static_cast<size_t>(c.numel()) * 4);
  return out;
}

py::object size_of(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return py::module_::import("vit._size").attr("Size")(t);
}

Shape sizes(const py::args& args, const char* op) {
  const bool one_sequence =
      args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0]));
  const py::sequence given = one_sequence ? args[0].cast<py::sequence>() : py::sequence(args);
  Shape out;
  for (size_t i = 0; i < given.size(); ++i) out.push_back(integer_of(given[i], op, fmt::format("size {}", i)));
  return out;
}

std::vector<int64_t> dims_of(const py::object& dim, const char* op) {
  if (dim.is_none()) return {};
  if (!py::isinstance<py::list>(dim) && !py::isinstance<py::tuple>(dim)) return {integer_of(dim, op, "dim")};
  std::vector<int64_t> out;
  for (const py::handle& v : dim) out.push_back(integer_of(v, op, "dim"));
  return out;
}

int64_t integer_of(const py::handle& v, const char* op, const std::string& what) {
  VIT_CHECK(!py::isinstance<py::bool_>(v) && PyIndex_Check(v.ptr()), op, "{} must be an integer, got {}", what,
            type_name(v));
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  if (!i) throw py::error_already_set();
  const long long value = PyLong_AsLongLong(i.ptr());
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    fail(op, "{} {} does not fit in 64 bits", what, py::repr(i).cast<std::string>().substr(0, 40));
  }
  return value;
}

double real_of(const py::handle& v, const char* op, const std::string& what) {
  const bool number = !py::isinstance<py::bool_>(v) &&
                      (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || is_numpy_number(v));
  VIT_CHECK(number && (!py::hasattr(v, "ndim") || v.attr("ndim").cast<int>() == 0), op, "{} must be a number, got {}",
            what, type_name(v));
  return number_of(v);
}

std::string type_name(const py::handle& o) { return py::str(py::type::of(o).attr("__name__")); }

double number_of(const py::handle& o) {
  const double value = PyFloat_AsDouble(o.ptr());
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    const std::string text = py::repr(o);
    throw Error(fmt::format("[number] {} does not fit a float", text.size() > 40 ? text.substr(0, 37) + "..." : text));
  }
  return value;
}

bool is_numpy_number(const py::handle& o) {
  const py::module_ numpy = py::module_::import("numpy");
  if (!py::isinstance(o, numpy.attr("ndarray")) && !py::isinstance(o, numpy.attr("generic"))) return false;
  const std::string kind = py::str(o.attr("dtype").attr("kind"));
  return kind == "i" || kind == "u" || kind == "f";
}

std::vector<vit::Keyword> keywords_of(const py::kwargs& kwargs, const char* op) {
  auto text = [op](const py::handle& v, const std::string& key) -> std::string {
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
    if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::isinstance<py::str>(v)) return py::str(v);
    throw vit::Error(std::string("[") + op + "] " + key + ": takes a number, a string or True/False, got a " +
                     type_name(v));
  };
  std::vector<vit::Keyword> keywords;
  for (const auto& [k, v] : kwargs) {
    const std::string key = py::str(k);
    if (v.is_none()) continue;
    vit::Keyword keyword{key, {}};
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      for (const auto& item : v) keyword.values.push_back(text(item, key));
    } else {
      keyword.values.push_back(text(v, key));
    }
    keywords.push_back(std::move(keyword));
  }
  return keywords;
}

}  // namespace vit::python
