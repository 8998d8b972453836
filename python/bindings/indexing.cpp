// t[...], len(t) and iter(t): integers select (the dimension goes), slices narrow; autograd flows
// through (the engine's select and slice views).
#include <fmt/format.h>

#include "convert.h"
#include "core/check.h"

namespace vit::python {
namespace {

// out[i] along dim: IndexError (not vit.Error) when out of range, so `for row in t:` ends as it
// does over any Python sequence.
Variable select(const Variable& out, int64_t dim, int64_t i) {
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
    if (py::isinstance<py::int_>(k)) {
      out = select(out, dim, k.cast<int64_t>());
    } else if (py::isinstance<py::slice>(k)) {
      out = slice(out, dim, k.cast<py::slice>());
      ++dim;
    } else {
      fail("index", "indices are integers and slices (a[1], a[:, 0:2]), got {}", std::string(py::str(k.get_type())));
    }
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
