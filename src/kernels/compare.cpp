// Elementwise comparisons (see compare.h): one plain loop per operator.
#include "kernels/compare.h"

namespace vit::kernels {
namespace {

template <typename T, class Op>
void compare_loop(const T* a, const T* b, T* y, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], b[i]) ? T(1) : T(0);
}

}  // namespace

const char* compare_name(Compare op) {
  switch (op) {
    case Compare::Eq:
      return "eq";
    case Compare::Ne:
      return "ne";
    case Compare::Lt:
      return "lt";
    case Compare::Le:
      return "le";
    case Compare::Gt:
      return "gt";
    case Compare::Ge:
      return "ge";
  }
  return "compare";
}

template <typename T>
void compare_forward(Compare op, const T* a, const T* b, T* y, int64_t n) {
  switch (op) {
    case Compare::Eq:
      return compare_loop(a, b, y, n, [](T x, T z) { return x == z; });
    case Compare::Ne:
      return compare_loop(a, b, y, n, [](T x, T z) { return x != z; });
    case Compare::Lt:
      return compare_loop(a, b, y, n, [](T x, T z) { return x < z; });
    case Compare::Le:
      return compare_loop(a, b, y, n, [](T x, T z) { return x <= z; });
    case Compare::Gt:
      return compare_loop(a, b, y, n, [](T x, T z) { return x > z; });
    case Compare::Ge:
      return compare_loop(a, b, y, n, [](T x, T z) { return x >= z; });
  }
}

template void compare_forward<float>(Compare, const float*, const float*, float*, int64_t);
template void compare_forward<double>(Compare, const double*, const double*, double*, int64_t);

}  // namespace vit::kernels
