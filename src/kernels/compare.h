// Elementwise comparisons (torch.eq, ne, lt, le, gt, ge): y[i] = 1 where a[i] op b[i] holds, else
// 0, in the operands' float type (vit has no bool dtype). NaN compares as IEEE says: unequal to
// everything, itself included. Inputs are contiguous and of one shape (the caller broadcasts).
#pragma once

#include <cstdint>

namespace vit::kernels {

enum class Compare { Eq, Ne, Lt, Le, Gt, Ge };

const char* compare_name(Compare op);  // "eq", "ne", ...

template <typename T>
void compare_forward(Compare op, const T* a, const T* b, T* y, int64_t n);

}  // namespace vit::kernels
