// Broadcast binary kernels (see binary.h): a flat, threaded loop when both operands are
// contiguous and the same shape; otherwise row by row through core/strided.h.
#include "kernels/binary.h"

#include <vector>

#include "core/strided.h"

namespace vit::kernels {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;

template <typename T>
inline T apply(Binary op, T a, T b) {
  switch (op) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
    case Binary::Div:
      return a / b;
  }
  return a;
}

bool is_row_major(const Shape& shape, const Strides& strides) { return strides == contiguous_strides(shape); }

}  // namespace

const char* binary_name(Binary op) {
  switch (op) {
    case Binary::Add:
      return "add";
    case Binary::Sub:
      return "sub";
    case Binary::Mul:
      return "mul";
    case Binary::Div:
      return "div";
  }
  return "?";
}

template <typename T>
void binary_forward(Binary op, const Shape& shape, const T* a, const Strides& a_strides, const T* b,
                    const Strides& b_strides, T* y) {
  const int64_t n = shape_numel(shape);
  if (is_row_major(shape, a_strides) && is_row_major(shape, b_strides)) {
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) y[i] = apply(op, a[i], b[i]);
    return;
  }
  const Strides y_strides = contiguous_strides(shape);
  for_each_row<3>(shape, {&y_strides, &a_strides, &b_strides},
                  [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& in) {
                    T* yr = y + off[0];
                    const T* ar = a + off[1];
                    const T* br = b + off[2];
                    for (int64_t i = 0; i < len; ++i) yr[i] = apply(op, ar[i * in[1]], br[i * in[2]]);
                  });
}

template <typename T>
void bias_add_forward(T* y, const T* bias, int64_t rows, int64_t n) {
#pragma omp parallel for schedule(static) if (rows * n > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
  }
}

template <typename T>
void bias_add_backward(const T* dy, T* dbias, int64_t rows, int64_t n) {
  // Column sums in double, row by row (a sequential order: same answer for any thread count).
  std::vector<double> acc(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) acc[i] += dy[r * n + i];
  }
  for (int64_t i = 0; i < n; ++i) dbias[i] += static_cast<T>(acc[i]);
}

template void bias_add_forward<float>(float*, const float*, int64_t, int64_t);
template void bias_add_forward<double>(double*, const double*, int64_t, int64_t);
template void bias_add_backward<float>(const float*, float*, int64_t, int64_t);
template void bias_add_backward<double>(const double*, double*, int64_t, int64_t);
template void binary_forward<float>(Binary, const Shape&, const float*, const Strides&, const float*, const Strides&,
                                    float*);
template void binary_forward<double>(Binary, const Shape&, const double*, const Strides&, const double*, const Strides&,
                                     double*);

}  // namespace vit::kernels
