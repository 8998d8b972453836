// t[...], len(t) and iter(t) as torch and numpy answer them: an integer (a numpy one too) selects
// and the dimension goes, a slice narrows, None and True add a dimension of size 1 (False: of
// size 0), `...` stands for the dimensions not named. Autograd flows through (the engine's select,
// slice and unsqueeze views).
#include <fmt/format.h>

#include "convert.h"
#include "core/check.h"

namespace vit::python {
namespace {

// out[i] along dim: IndexError (not vit.Error), so `for row in t:` ends as it does over any Python
// sequence.
Variable select(const Variable& out, int64_t dim, const py::handle& key) {
  const Py_ssize_t i = PyNumber_AsSsize_t(key.ptr(), PyExc_IndexError);
  if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
  const int64_t size = out.shape()[static_cast<size_t>(dim)];
  if (i < -size || i >= size) {
    throw py::index_error(fmt::format("[index] index {} is out of range for dimension {} of size {}", i, dim, size));
  }
  return out.select(dim, i < 0 ? i + size : i);
}

Variable slice(const Variable& out, int64_t dim, const py::slice& s) {
  const int64_t size = out.shape()[static_cast<size_t>(dim)];
  py::ssize_t start = 0, stop = 0, step = 0, length = 0;
  VIT_CHECK(s.compute(size, &start, &stop, &step, &length), "index", "bad slice");
  VIT_CHECK(step > 0, "index", "slices take a positive step, got {}", step);
  return out.slice(dim, start, start + length * step - (length > 0 ? step - 1 : 0), step);
}

enum class Kind { Integer, Slice, NewAxis, True, False, Ellipsis };

Kind kind_of(const py::handle& k) {
  if (py::isinstance<py::bool_>(k) || py::isinstance(k, py::module_::import("numpy").attr("bool_")))
    return k.cast<bool>() ? Kind::True : Kind::False;
  if (k.is_none()) return Kind::NewAxis;
  if (k.ptr() == Py_Ellipsis) return Kind::Ellipsis;
  if (py::isinstance<py::slice>(k)) return Kind::Slice;
  const bool array =
      py::isinstance(k, py::module_::import("numpy").attr("ndarray")) && py::cast<py::ssize_t>(k.attr("ndim")) > 0;
  if (py::isinstance<py::list>(k) || py::isinstance<Variable>(k) || array)
    fail("index",
         "indexing by a list, array or tensor of indices (advanced indexing) is not supported, got {}: select "
         "with integers and slices, or gather with vit.cat of the rows",
         type_name(k));
  if (PyIndex_Check(k.ptr())) return Kind::Integer;
  fail("index",
       "indices are integers and slices (a[1], a[:, 0:2]), or None, ... and True/False (a[None], a[..., 0]), got {}",
       type_name(k));
}

Variable index(const Variable& v, const py::object& key) {
  std::vector<std::pair<Kind, py::object>> items;
  const py::tuple keys = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  int64_t named = 0, ellipses = 0;
  for (const py::handle& k : keys) {
    items.emplace_back(kind_of(k), py::reinterpret_borrow<py::object>(k));
    named += items.back().first == Kind::Integer || items.back().first == Kind::Slice;
    ellipses += items.back().first == Kind::Ellipsis;
  }
  VIT_CHECK(named == 0 || v.dim() > 0, "index",
            "a 0-dimensional tensor takes no integer or slice index: its value is .item() (t[None] and t[...] work)");
  VIT_CHECK(named <= v.dim(), "index", "{} indices for a tensor of {} dimensions (shape {})", named, v.dim(),
            shape_str(v.shape()));
  VIT_CHECK(ellipses <= 1, "index", "an index can only have a single ellipsis ('...'), got {}", ellipses);
  Variable out = v;
  int64_t dim = 0;
  for (const auto& [kind, k] : items) {
    if (kind == Kind::Integer) out = select(out, dim, k);
    if (kind == Kind::Slice) out = slice(out, dim++, k.cast<py::slice>());
    if (kind == Kind::NewAxis || kind == Kind::True) out = out.unsqueeze(dim++);
    if (kind == Kind::False) {
      out = out.unsqueeze(dim).slice(dim, 0, 0);
      ++dim;
    }
    if (kind == Kind::Ellipsis) dim += v.dim() - named;
  }
  return out;
}

// len(t): the first dimension's size; a 0-d tensor has none (TypeError, as torch and numpy).
int64_t length(const Variable& v) {
  if (v.dim() == 0) throw py::type_error("len() of a 0-d tensor");
  return v.shape()[0];
}

// iter(t): its rows, t[0], t[1], ... (TypeError for a 0-d tensor).
py::iterator rows(const Variable& v) {
  if (v.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
  py::list out;
  for (int64_t i = 0; i < v.shape()[0]; ++i) out.append(v.select(0, i));
  return py::iter(out);
}

}  // namespace

void bind_indexing(py::class_<Variable>& tensor) {
  tensor.def("__getitem__", &index).def("__len__", &length).def("__iter__", &rows);
}

}  // namespace vit::python
