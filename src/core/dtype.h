// Element types. Models run in float32; float64 exists so gradients can be checked by finite
// differences in double precision through exactly the same code paths; int64 holds indices and
// class labels (argmax results, cross-entropy targets), as PyTorch's LongTensor does; int8 holds
// quantized weights (kernels/gemm/int8_gemm.h: stored, converted, never computed on by the float ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/check.h"

namespace vit {

enum class DType : uint8_t { F32, F64, I64, I8 };

inline size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : dtype == DType::I8 ? 1 : 8; }
inline std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    case DType::I64:
      return "int64";
    case DType::I8:
      return "int8";
  }
  return "?";
}

template <typename T>
constexpr DType dtype_of() {
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int8_t>,
      "vit tensors hold float, double, int64_t or int8_t");
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::I8;
  else
    return DType::I64;
}

// One element converted to D: as static_cast, except that into int8 a value is rounded and
// saturated to [-128, 127] (NaN to 0), so no conversion is undefined.
template <typename D, typename S>
inline D convert_element(S v) {
  if constexpr (std::is_same_v<D, int8_t> && !std::is_same_v<S, int8_t>) {
    const double x = static_cast<double>(v);
    if (!(x == x)) return 0;
    return static_cast<int8_t>(x <= -128.0 ? -128.0 : x >= 127.0 ? 127.0 : __builtin_nearbyint(x));
  } else {
    return static_cast<D>(v);
  }
}

// Calls fn.template operator()<T>() with T = float or double matching dtype, for math:
//   dispatch(t.dtype(), [&]<typename T>() { kernel<T>(t.data<T>(), ...); });
// An integer tensor is refused with an error naming the dtype.
template <typename Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  VIT_CHECK(dtype == DType::F32 || dtype == DType::F64, "dtype",
            "this operation needs a float32 or float64 tensor, got {}", dtype_name(dtype));
  if (dtype == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

// As dispatch, but also the integers: for data movement (copies, fills, element access, printing).
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::I64) return fn.template operator()<int64_t>();
  if (dtype == DType::I8) return fn.template operator()<int8_t>();
  if (dtype == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

}  // namespace vit
