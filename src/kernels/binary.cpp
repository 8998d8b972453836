// Broadcast binary kernels (see binary.h): a flat, threaded loop when both operands are
// contiguous and the same shape; otherwise row by row through core/strided.h, after merging the
// dims that every operand walks as one (a (B, 1, 1) broadcast over (B, N, D) becomes rows of
// N * D). A row whose operands are contiguous or broadcast scalars runs its own loop, which
// vectorises; the float rows, and the bias gradient's column sums, are compiled once per ISA
// (isa_target.h).
#include "kernels/binary.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/strided.h"
#include "kernels/isa_target.h"
#include "kernels/threads.h"

namespace vit::kernels {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;
constexpr int64_t kChunk = 1 << 13;  // elements per task of the flat loop

template <Binary Op, typename T>
inline T apply(T a, T b) {
  if constexpr (Op == Binary::Add) return a + b;
  if constexpr (Op == Binary::Sub) return a - b;
  if constexpr (Op == Binary::Mul) return a * b;
  if constexpr (Op == Binary::Div) return a / b;
}

// y[i] = a[i * as] op b[i * bs] for i < n (y may be a or b itself, never a shifted copy).
template <Binary Op, typename T>
inline void row_op(T* y, const T* a, int64_t as, const T* b, int64_t bs, int64_t n) {
  if (as == 1 && bs == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = apply<Op>(a[i], b[i]);
  } else if (as == 1 && bs == 0) {
    const T bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = apply<Op>(a[i], bv);
  } else if (as == 0 && bs == 1) {
    const T av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = apply<Op>(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = apply<Op>(a[i * as], b[i * bs]);
  }
}

template <typename T>
inline void row_generic(Binary op, T* y, const T* a, int64_t as, const T* b, int64_t bs, int64_t n) {
  switch (op) {
    case Binary::Add:
      return row_op<Binary::Add>(y, a, as, b, bs, n);
    case Binary::Sub:
      return row_op<Binary::Sub>(y, a, as, b, bs, n);
    case Binary::Mul:
      return row_op<Binary::Mul>(y, a, as, b, bs, n);
    case Binary::Div:
      return row_op<Binary::Div>(y, a, as, b, bs, n);
  }
}

template <typename T>
using RowFn = void (*)(Binary, T*, const T*, int64_t, const T*, int64_t, int64_t);
[[gnu::flatten]] void row_plain(Binary op, float* y, const float* a, int64_t as, const float* b, int64_t bs,
                                int64_t n) {
  row_generic<float>(op, y, a, as, b, bs, n);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void row_avx2(Binary op, float* y, const float* a, int64_t as, const float* b,
                                               int64_t bs, int64_t n) {
  row_generic<float>(op, y, a, as, b, bs, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void row_avx512(Binary op, float* y, const float* a, int64_t as, const float* b,
                                                   int64_t bs, int64_t n) {
  row_generic<float>(op, y, a, as, b, bs, n);
}

template <typename T>
RowFn<T> pick_row() {
  if constexpr (std::is_same_v<T, float>) {
    return per_isa<RowFn<float>>(row_plain, row_avx2, row_avx512);
  } else {
    return row_generic<T>;
  }
}

// acc (n) += rows of dy (rows, n), row by row: blocks of kSumRows rows summed in T (in `block`,
// n values), each block then added in double.
constexpr int64_t kSumRows = 32;
template <typename T>
inline void column_sums(const T* __restrict dy, double* __restrict acc, T* __restrict block, int64_t rows, int64_t n) {
  for (int64_t r0 = 0; r0 < rows; r0 += kSumRows) {
    const T* d = dy + r0 * n;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) block[i] = d[i];
    for (int64_t r = 1; r < std::min(kSumRows, rows - r0); ++r) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) block[i] += d[r * n + i];
    }
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(block[i]);
  }
}

using ColumnSumsFn = void (*)(const float*, double*, float*, int64_t, int64_t);
[[gnu::flatten]] void sums_plain(const float* dy, double* acc, float* block, int64_t rows, int64_t n) {
  column_sums(dy, acc, block, rows, n);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void sums_avx2(const float* dy, double* acc, float* block, int64_t rows, int64_t n) {
  column_sums(dy, acc, block, rows, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void sums_avx512(const float* dy, double* acc, float* block, int64_t rows,
                                                    int64_t n) {
  column_sums(dy, acc, block, rows, n);
}

bool is_row_major(const Shape& shape, const Strides& strides) { return strides == contiguous_strides(shape); }

// Merges each dim into the next inner one where all three operands step over the pair as over
// one dim (outer stride = inner stride * inner size), and drops dims of size 1.
void merge_dims(Shape& shape, Strides& ys, Strides& as, Strides& bs) {
  Shape s;
  Strides y, a, b;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1 && shape.size() > 1) continue;
    if (!s.empty() && ys[d] * shape[d] == y.back() && as[d] * shape[d] == a.back() && bs[d] * shape[d] == b.back()) {
      s.back() *= shape[d];
      y.back() = ys[d];
      a.back() = as[d];
      b.back() = bs[d];
      continue;
    }
    s.push_back(shape[d]);
    y.push_back(ys[d]);
    a.push_back(as[d]);
    b.push_back(bs[d]);
  }
  shape = std::move(s);
  ys = std::move(y);
  as = std::move(a);
  bs = std::move(b);
}

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
  const RowFn<T> row = pick_row<T>();
  if (is_row_major(shape, a_strides) && is_row_major(shape, b_strides)) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    parallel_for(chunks, n > kParallelThreshold, [&](int64_t c) {
      const int64_t i = c * kChunk;
      row(op, y + i, a + i, 1, b + i, 1, std::min(kChunk, n - i));
    });
    return;
  }
  Shape merged = shape;
  Strides y_strides = contiguous_strides(shape), as = a_strides, bs = b_strides;
  merge_dims(merged, y_strides, as, bs);
  for_each_row<3>(merged, {&y_strides, &as, &bs},
                  [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& in) {
                    row(op, y + off[0], a + off[1], in[1], b + off[2], in[2], len);
                  });
}

template <typename T>
void bias_add_forward(T* y, const T* bias, int64_t rows, int64_t n) {
  parallel_for(rows, rows * n > kParallelThreshold, [&](int64_t r) {
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
  });
}

template <typename T>
void bias_add_backward(const T* dy, T* dbias, int64_t rows, int64_t n) {
  // Column sums row by row, blocks in T added in double (a sequential order: same answer for any
  // thread count).
  std::vector<double> acc(n, 0.0);
  std::vector<T> block(n);
  if constexpr (std::is_same_v<T, float>) {
    per_isa<ColumnSumsFn>(sums_plain, sums_avx2, sums_avx512)(dy, acc.data(), block.data(), rows, n);
  } else {
    column_sums(dy, acc.data(), block.data(), rows, n);
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
