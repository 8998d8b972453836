// How close two float32 tensors are when a reduced-precision path (bf16, int8) computed one of
// them: the cosine of their flattened values (the bound such tests put) and the largest absolute
// difference (that the reduced path really ran: float32 twice would be identical).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace vit::testing {

struct Similarity {
  double cosine = 0;
  double worst = 0;  // max |a - b|
};

// Over the first min(a.numel(), b.numel()) values (callers check the shapes).
inline Similarity similarity(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  const int64_t n = std::min(x.numel(), y.numel());
  double dot = 0, nx = 0, ny = 0, worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double u = x.data<float>()[i], v = y.data<float>()[i];
    dot += u * v, nx += u * u, ny += v * v;
    worst = std::max(worst, std::fabs(u - v));
  }
  return {dot / std::sqrt(nx * ny), worst};
}

}  // namespace vit::testing
