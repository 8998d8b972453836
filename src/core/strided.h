// Walking strided (possibly broadcast or overlapping) views row by row. Everything that moves
// elements between non-contiguous layouts (contiguous(), copies, broadcast arithmetic, the
// backward of view ops) goes through for_each_row, so the index arithmetic is written once.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace vit {

// Calls fn(offsets, n, inner_strides) once per innermost row of `shape`, where offsets[k] is the
// element offset of the row's first element in operand k (strides[k] gives that operand's
// strides, same rank as shape) and inner_strides[k] the operand's innermost stride.
// Rows are visited in row-major order, sequentially (safe for overlapping destinations).
template <size_t K, typename Fn>
void for_each_row(const Shape& shape, const std::array<const Strides*, K>& strides, Fn&& fn) {
  const size_t ndim = shape.size();
  std::array<int64_t, K> offsets{};
  std::array<int64_t, K> inner{};
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  if (ndim == 0) {
    fn(offsets, int64_t{1}, inner);
    return;
  }
  for (size_t k = 0; k < K; ++k) inner[k] = (*strides[k])[ndim - 1];
  const int64_t n = shape[ndim - 1];
  std::vector<int64_t> counter(ndim - 1, 0);
  while (true) {
    fn(offsets, n, inner);
    // Advance the odometer over the outer dims.
    size_t d = ndim - 1;
    while (d-- > 0) {
      if (++counter[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) offsets[k] += (*strides[k])[d];
        break;
      }
      for (size_t k = 0; k < K; ++k) offsets[k] -= (*strides[k])[d] * (shape[d] - 1);
      counter[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

}  // namespace vit
