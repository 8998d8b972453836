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
  Shape out;
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

std::vector<int64_t> dims_of(const py::object& dim) {
  if (dim.is_none()) return {};
  if (py::isinstance<py::int_>(dim)) return {dim.cast<int64_t>()};
  std::vector<int64_t> out;
  for (const py::handle& v : dim) out.push_back(v.cast<int64_t>());
  return out;
}

std::string type_name(const py::handle& o) { return py::str(py::type::of(o).attr("__name__")); }

}  // namespace vit::python
