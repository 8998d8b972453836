// Elementwise unary kernels (see activation.h). Each function's value and derivative are
// written once as scalar templates; the array loops are split across threads for large n.
#include "kernels/activation.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/isa_target.h"
#include "kernels/threads.h"
#include "kernels/vmath.h"

namespace vit::kernels {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;  // below this, threading costs more than it saves

template <typename T>
inline T value(Unary op, T x) {
  switch (op) {
    case Unary::Neg:
      return -x;
    case Unary::Exp:
      return std::exp(x);
    case Unary::Log:
      return std::log(x);
    case Unary::Sqrt:
      return std::sqrt(x);
    case Unary::Tanh:
      return std::tanh(x);
    case Unary::Relu:
      return x > T(0) ? x : T(0);
    case Unary::Gelu:
      return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2)));
    case Unary::GeluTanh: {
      const T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhCoeff) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(inner));
    }
    case Unary::Sigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case Unary::Abs:
      return std::fabs(x);
  }
  return x;
}

// d f / d x at x, given y = f(x).
template <typename T>
inline T derivative(Unary op, T x, T y) {
  switch (op) {
    case Unary::Neg:
      return T(-1);
    case Unary::Exp:
      return y;
    case Unary::Log:
      return T(1) / x;
    case Unary::Sqrt:
      return T(0.5) / y;
    case Unary::Tanh:
      return T(1) - y * y;
    case Unary::Relu:
      return x > T(0) ? T(1) : T(0);
    case Unary::Gelu: {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrt1_2)));
      const T pdf = std::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
      return cdf + x * pdf;
    }
    case Unary::GeluTanh: {
      const T x2 = x * x;
      const T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhCoeff) * x2 * x);
      const T t = std::tanh(inner);
      const T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhCoeff) * x2);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
    }
    case Unary::Sigmoid:
      return y * (T(1) - y);
    case Unary::Abs:
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  }
  return T(0);
}

}  // namespace

const char* unary_name(Unary op) {
  switch (op) {
    case Unary::Neg:
      return "neg";
    case Unary::Exp:
      return "exp";
    case Unary::Log:
      return "log";
    case Unary::Sqrt:
      return "sqrt";
    case Unary::Tanh:
      return "tanh";
    case Unary::Relu:
      return "relu";
    case Unary::Gelu:
      return "gelu";
    case Unary::GeluTanh:
      return "gelu_tanh";
    case Unary::Sigmoid:
      return "sigmoid";
    case Unary::Abs:
      return "abs";
  }
  return "?";
}

// Exact GELU in float32 with the vectorisable erf/exp (vmath.h's gelu_fast). The simd loops sit
// in their own functions so the vectoriser sees them whole; threads split the array into chunks.

inline void gelu_forward_body(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_fast(x[i]);
}

inline void gelu_backward_body(const float* __restrict x, const float* __restrict dy, float* __restrict dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * gelu_grad_fast(x[i]);
}

// Each chunk loop once per ISA (isa_target.h): vectorised at each width in a baseline build.
using ForwardChunk = void (*)(const float*, float*, int64_t);
using BackwardChunk = void (*)(const float*, const float*, float*, int64_t);
[[gnu::flatten]] void gelu_forward_plain(const float* x, float* y, int64_t n) { gelu_forward_body(x, y, n); }
[[gnu::flatten]] VIT_TARGET_AVX2 void gelu_forward_avx2(const float* x, float* y, int64_t n) {
  gelu_forward_body(x, y, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void gelu_forward_avx512(const float* x, float* y, int64_t n) {
  gelu_forward_body(x, y, n);
}
[[gnu::flatten]] void gelu_backward_plain(const float* x, const float* dy, float* dx, int64_t n) {
  gelu_backward_body(x, dy, dx, n);
}
[[gnu::flatten]] VIT_TARGET_AVX2 void gelu_backward_avx2(const float* x, const float* dy, float* dx, int64_t n) {
  gelu_backward_body(x, dy, dx, n);
}
[[gnu::flatten]] VIT_TARGET_AVX512 void gelu_backward_avx512(const float* x, const float* dy, float* dx, int64_t n) {
  gelu_backward_body(x, dy, dx, n);
}

// Calls fn(begin, end) on contiguous chunks of [0, n), in parallel when n is large.
template <typename Fn>
void for_chunks(int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n > kParallelThreshold, [&](int64_t c) { fn(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

template <typename T>
void unary_forward(Unary op, const T* x, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (op == Unary::Gelu) {
      const ForwardChunk chunk = per_isa<ForwardChunk>(gelu_forward_plain, gelu_forward_avx2, gelu_forward_avx512);
      for_chunks(n, [&](int64_t b, int64_t e) { chunk(x + b, y + b, e - b); });
      return;
    }
  }
  if (op == Unary::Relu) {  // the hybrid backbone's: a branch-free loop the compiler vectorises
    for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) y[i] = value(Unary::Relu, x[i]);
    });
    return;
  }
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) { y[i] = value(op, x[i]); });
}

template <typename T>
void unary_backward(Unary op, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (op == Unary::Gelu) {
      const BackwardChunk chunk = per_isa<BackwardChunk>(gelu_backward_plain, gelu_backward_avx2, gelu_backward_avx512);
      for_chunks(n, [&](int64_t b, int64_t e) { chunk(x + b, dy + b, dx + b, e - b); });
      return;
    }
  }
  if (op == Unary::Relu && x != nullptr) {
    for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) dx[i] += x[i] > T(0) ? dy[i] : T(0);
    });
    return;
  }
  parallel_for(n, n > kParallelThreshold,
               [&](int64_t i) { dx[i] += dy[i] * derivative(op, x ? x[i] : T(0), y ? y[i] : T(0)); });
}

double unary_ref(Unary op, double x) { return value<double>(op, x); }

double unary_grad_ref(Unary op, double x) { return derivative<double>(op, x, value<double>(op, x)); }

template <typename T>
void pow_forward(const T* x, double p, T* y, int64_t n) {
  parallel_for(n, n > kParallelThreshold,
               [&](int64_t i) { y[i] = static_cast<T>(std::pow(static_cast<double>(x[i]), p)); });
}

template <typename T>
void pow_backward(const T* x, double p, const T* dy, T* dx, int64_t n) {
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) {
    const double g = p == 0.0 ? 0.0 : p * std::pow(static_cast<double>(x[i]), p - 1.0);
    dx[i] += dy[i] * static_cast<T>(g);
  });
}

template <typename T>
void affine_forward(const T* x, double a, double b, T* y, int64_t n) {
  const T ta = static_cast<T>(a), tb = static_cast<T>(b);
  parallel_for(n, n > kParallelThreshold, [&](int64_t i) { y[i] = ta * x[i] + tb; });
}

#define VIT_INSTANTIATE(T)                                                           \
  template void unary_forward<T>(Unary, const T*, T*, int64_t);                      \
  template void unary_backward<T>(Unary, const T*, const T*, const T*, T*, int64_t); \
  template void pow_forward<T>(const T*, double, T*, int64_t);                       \
  template void pow_backward<T>(const T*, double, const T*, T*, int64_t);            \
  template void affine_forward<T>(const T*, double, double, T*, int64_t);
VIT_INSTANTIATE(float)
VIT_INSTANTIATE(double)
#undef VIT_INSTANTIATE

}  // namespace vit::kernels
