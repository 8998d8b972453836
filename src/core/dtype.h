// Element types. Models run in float32; float64 exists so gradients can be checked by finite
// differences in double precision through exactly the same code paths; int64 holds indices and
// class labels (argmax results, cross-entropy targets), as PyTorch's LongTensor does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/check.h"

namespace vit {

enum class DType : uint8_t { F32, F64, I64 };

inline size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 8; }
inline std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    case DType::I64:
      return "int64";
  }
  return "?";
}

template <typename T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>,
                "vit tensors hold float, double or int64_t");
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else
    return DType::I64;
}

// Calls fn.template operator()<T>() with T = float or double matching dtype, for math:
//   dispatch(t.dtype(), [&]<typename T>() { kernel<T>(t.data<T>(), ...); });
// An int64 tensor is refused with an error naming the dtype.
template <typename Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  VIT_CHECK(dtype != DType::I64, "dtype", "this operation needs a float32 or float64 tensor, got int64");
  if (dtype == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

// As dispatch, but also int64: for data movement (copies, fills, element access, printing).
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::I64) return fn.template operator()<int64_t>();
  if (dtype == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

}  // namespace vit
