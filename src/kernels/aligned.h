// 64-byte aligned heap arrays for packed GEMM operands (cache-line and AVX-512 aligned), freed by
// one deleter: the packed float32 weights (gemm/packed_gemm.h) and the int8 ones (gemm/int8_gemm.h).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace vit::kernels {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
using AlignedArray = std::unique_ptr<T[], AlignedFree>;

// count elements of T, 64-byte aligned, the size rounded up to whole 64-byte lines (at least
// one); zeroed when asked. Throws std::bad_alloc.
template <typename T>
AlignedArray<T> aligned_array(size_t count, bool zeroed) {
  const size_t bytes = std::max<size_t>(64, (count * sizeof(T) + 63) / 64 * 64);
  auto* p = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  if (zeroed) std::memset(p, 0, bytes);
  return AlignedArray<T>(p);
}

}  // namespace vit::kernels
