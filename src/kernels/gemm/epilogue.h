// The one epilogue of every GEMM (float32 packed, BLAS fallback, int8, and their references):
// what happens to a finished tile when it is stored for the last time,
//   C = act(alpha * acc + beta * C + bias)      acc = op(A) @ B (the int8 kernel: dequantised first)
// with beta 0 (C is not read: NaN there is ignored, as BLAS does), 1 (a residual: C += ...) or any
// other value; bias (N) is a separate pointer of the GEMM call (it may be null); act one of the
// activations below. The Linear layer's four uses have names: Epilogue::Store, Accumulate, Gelu,
// GeluTanh; a convolution's ReLU (Epilogue::Relu) is the fifth. The float32 activations are vmath.h's (the activation
// kernels use the same), the references evaluate in double (activate_ref).
#pragma once

#include <cstdint>

#include "kernels/vmath.h"

namespace vit::kernels {

enum class Activation : uint8_t { None, Gelu, GeluTanh, Relu };

const char* activation_name(Activation act);

struct Epilogue {
  float alpha = 1.0f;
  float beta = 0.0f;
  Activation act = Activation::None;

  static const Epilogue Store;       // C = acc + bias
  static const Epilogue Accumulate;  // C += acc + bias
  static const Epilogue Gelu;        // C = gelu(acc + bias), exact (erf) GELU
  static const Epilogue GeluTanh;    // C = gelu(acc + bias), tanh approximation
  static const Epilogue Relu;        // C = max(acc + bias, 0)

  bool operator==(const Epilogue&) const = default;
};

inline constexpr Epilogue Epilogue::Store{1.0f, 0.0f, Activation::None};
inline constexpr Epilogue Epilogue::Accumulate{1.0f, 1.0f, Activation::None};
inline constexpr Epilogue Epilogue::Gelu{1.0f, 0.0f, Activation::Gelu};
inline constexpr Epilogue Epilogue::GeluTanh{1.0f, 0.0f, Activation::GeluTanh};
inline constexpr Epilogue Epilogue::Relu{1.0f, 0.0f, Activation::Relu};

// The float32 activation of the fast stores (a compile-time choice inside the tile loops).
template <Activation A>
inline float activate(float x) {
  if constexpr (A == Activation::Gelu) {
    return gelu_fast(x);
  } else if constexpr (A == Activation::GeluTanh) {
    return gelu_tanh_fast(x);
  } else if constexpr (A == Activation::Relu) {
    return x > 0.0f ? x : 0.0f;
  } else {
    return x;
  }
}

// The reference activation, in double (the references and the double Linear path).
double activate_ref(Activation act, double x);

// Calls fn.template operator()<A>() with the activation as a compile-time constant.
template <typename Fn>
decltype(auto) with_activation(Activation act, Fn&& fn) {
  switch (act) {
    case Activation::Gelu:
      return fn.template operator()<Activation::Gelu>();
    case Activation::GeluTanh:
      return fn.template operator()<Activation::GeluTanh>();
    case Activation::Relu:
      return fn.template operator()<Activation::Relu>();
    case Activation::None:
      break;
  }
  return fn.template operator()<Activation::None>();
}

}  // namespace vit::kernels
