// Shape arithmetic shared by every layer: element counts, strides, broadcasting, dim wrapping.
#include "core/shape.h"

#include <fmt/format.h>

#include "core/check.h"

namespace vit {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    VIT_CHECK(s >= 0, "shape", "negative size {} in shape {}", s, shape_str(shape));
    VIT_CHECK(!__builtin_mul_overflow(n, s, &n), "shape", "element count of {} overflows", shape_str(shape));
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Zero-size dimensions do not bound the other dimensions' strides: (0, 2^40, 2^40) has no
    // elements but its strides still overflow int64, so refuse it (found by fuzzing .npy).
    VIT_CHECK(!__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride), "shape",
              "strides of shape {} overflow", shape_str(shape));
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t wrapped = dim < 0 ? dim + ndim : dim;
  VIT_CHECK(wrapped >= 0 && wrapped < ndim, op, "dim {} out of range for a {}-d tensor", dim, ndim);
  return wrapped;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    VIT_CHECK(sa == sb || sa == 1 || sb == 1, op, "shapes {} and {} do not broadcast", shape_str(a), shape_str(b));
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Shape infer_shape(Shape requested, int64_t numel, const char* op, const Shape& from) {
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < requested.size(); ++i) {
    if (requested[i] == -1) {
      VIT_CHECK(infer_at < 0, op, "only one dimension can be -1, got {}", shape_str(requested));
      infer_at = static_cast<int>(i);
    } else {
      VIT_CHECK(requested[i] >= 0, op, "invalid size {} in {}", requested[i], shape_str(requested));
      known *= requested[i];
    }
  }
  if (infer_at >= 0) {
    VIT_CHECK(known != 0 && numel % known == 0, op, "shape {} is invalid for input of shape {}", shape_str(requested),
              shape_str(from));
    requested[infer_at] = numel / known;
  }
  VIT_CHECK(shape_numel(requested) == numel, op, "shape {} is invalid for input of shape {} ({} elements)",
            shape_str(requested), shape_str(from), numel);
  return requested;
}

}  // namespace vit
