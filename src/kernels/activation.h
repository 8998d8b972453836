// Elementwise unary functions: forward y = f(x) and backward dx += dy * f'(x), over n
// contiguous elements. Backward may read x, y (the saved output) or both, whichever is exact
// and cheap. GELU follows PyTorch: exact (erf) and the tanh approximation.
#pragma once

#include <cstdint>

namespace vit::kernels {

enum class Unary { Neg, Exp, Log, Sqrt, Tanh, Relu, Gelu, GeluTanh, Sigmoid, Abs };

const char* unary_name(Unary op);

template <typename T>
void unary_forward(Unary op, const T* x, T* y, int64_t n);
template <typename T>
void unary_backward(Unary op, const T* x, const T* y, const T* dy, T* dx, int64_t n);

// Readable references for the tests (one element at a time, in double).
double unary_ref(Unary op, double x);
double unary_grad_ref(Unary op, double x);

// y = x^p and dx += dy * p * x^(p-1).
template <typename T>
void pow_forward(const T* x, double p, T* y, int64_t n);
template <typename T>
void pow_backward(const T* x, double p, const T* dy, T* dx, int64_t n);

// y = a * x + b (scalar arithmetic: x + s, x * s, s - x, ...).
template <typename T>
void affine_forward(const T* x, double a, double b, T* y, int64_t n);

}  // namespace vit::kernels
