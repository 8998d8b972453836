// Shapes and strides: row-major, outermost dimension first, sizes and strides in elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vit {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// Product of sizes; throws "[shape] ... overflows" if it does not fit in int64.
int64_t shape_numel(const Shape& shape);
// Row-major strides of a contiguous tensor of this shape.
Strides contiguous_strides(const Shape& shape);
// "(3, 4)"; "()" for a scalar.
std::string shape_str(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws "[op] dim d out of range for N-d tensor".
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy/PyTorch broadcasting of two shapes; throws "[op] shapes (..) and (..) do not broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Resolves a single -1 in a requested shape against numel; checks the element count matches.
Shape infer_shape(Shape requested, int64_t numel, const char* op, const Shape& from);

}  // namespace vit
