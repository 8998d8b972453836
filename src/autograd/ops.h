// Every differentiable operation, as free functions on Variables (PyTorch names and
// semantics). Each validates its inputs at this boundary and throws "[op] ..." naming the
// shapes; each is implemented in autograd/ops/<family>.cpp as: validate, run the forward
// kernel, record a backward that calls the backward kernel.
#pragma once

#include <vector>

#include "autograd/variable.h"
#include "core/random.h"

namespace vit {

// ---- elementwise with broadcasting (binary.cpp) ----
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
// ---- scalar variants and unary functions (elementwise.cpp) ----
Variable add(const Variable& a, double s);
Variable mul(const Variable& a, double s);
Variable sub(double s, const Variable& a);  // s - a
Variable div(double s, const Variable& a);  // s / a
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable pow(const Variable& x, double exponent);
Variable tanh(const Variable& x);
Variable relu(const Variable& x);
Variable sigmoid(const Variable& x);
Variable gelu(const Variable& x, bool tanh_approximation = false);  // exact erf form by default
Variable abs(const Variable& x);

Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator+(const Variable& a, double s);
Variable operator+(double s, const Variable& a);
Variable operator-(const Variable& a, double s);
Variable operator-(double s, const Variable& a);
Variable operator*(const Variable& a, double s);
Variable operator*(double s, const Variable& a);
Variable operator/(const Variable& a, double s);
Variable operator/(double s, const Variable& a);
Variable operator-(const Variable& a);

// ---- reductions (reduce.cpp); empty dims = all dims ----
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable var(const Variable& x, const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);
Variable std(const Variable& x, const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);
struct MaxResult {
  Variable values;
  Tensor indices;  // int64
};
MaxResult max(const Variable& x, int64_t dim, bool keepdim = false);
Variable max(const Variable& x);  // over all elements
Tensor argmax(const Variable& x, int64_t dim, bool keepdim = false);

// ---- views and copies (view.cpp) ----
Variable cat(const std::vector<Variable>& xs, int64_t dim);
Variable stack(const std::vector<Variable>& xs, int64_t dim);

// ---- matrix products (matmul.cpp) ----
// PyTorch's matmul: 1-d operands are promoted and squeezed back; batch dims broadcast.
Variable matmul(const Variable& a, const Variable& b);
Variable bmm(const Variable& a, const Variable& b);  // (B, M, K) @ (B, K, N), no broadcasting
// The arithmetic of the GEMMs of linear and conv2d (forward, dX, dW): float32, or BF16 -- mixed
// precision as PyTorch's CPU autocast runs them: both operands rounded to bfloat16, products
// summed in float32 (kernels/gemm/bf16_train_gemm.h); the result, bias and everything around stay
// float32. BF16 takes float32 tensors only. nn::Linear and nn::Conv2d carry one
// (nn::set_matmul_precision); a backward runs with the precision its forward ran with.
enum class MatmulPrecision { F32, BF16 };
// y (..., out) = x (..., in) @ weight(out, in)^T + bias(out); bias may be undefined.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias,
                MatmulPrecision precision = MatmulPrecision::F32);

// ---- normalisation and probabilities (softmax.cpp, layernorm.cpp, batchnorm.cpp, loss.cpp) ----
Variable softmax(const Variable& x, int64_t dim);
Variable log_softmax(const Variable& x, int64_t dim);
// Normalises over the trailing dims `normalized_shape`; weight/bias (that shape) may be undefined.
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight, const Variable& bias,
                    double eps = 1e-5);
// torch.nn.functional.batch_norm over dim 1 of x (B, C, ...): in training, normalises with the
// batch's statistics (population variance) and, when running_mean / running_var (C) are given,
// moves them in place toward the batch's: running = (1 - momentum) * running + momentum * batch,
// with the unbiased variance, as PyTorch does; in evaluation, normalises with the running ones
// (then required). weight / bias (C) may be undefined.
Variable batch_norm(const Variable& x, const Tensor& running_mean, const Tensor& running_var, const Variable& weight,
                    const Variable& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// The same for channels-last x (..., C): the channels are the last dim (a (B, H, W, C) map).
Variable batch_norm_channels_last(const Variable& x, const Tensor& running_mean, const Tensor& running_var,
                                  const Variable& weight, const Variable& bias, bool training, double momentum = 0.1,
                                  double eps = 1e-5);
// Mean cross-entropy of logits (R, K) against int64 targets (R), with label smoothing in [0, 1].
Variable cross_entropy(const Variable& logits, const Tensor& targets, double label_smoothing = 0.0);

// ---- convolution, dropout, attention (conv.cpp, dropout.cpp, attention.cpp) ----
// Channels-last: x (B, H, W, C), weight (OC, C, KH, KW) as conv2d's, bias (OC) or undefined ->
// (B, OH, OW, OC) contiguous: conv2d(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1), without the
// permutes (im2row_nhwc + one GEMM with the weight permuted to (OC, KH, KW, C); a 1x1 stride-1
// convolution is the GEMM alone). A hybrid's backbone runs on it (model/backbone.h).
Variable conv2d_channels_last(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride = 1,
                              int64_t padding = 0, MatmulPrecision precision = MatmulPrecision::F32);
// x (B, C, H, W), weight (OC, C, KH, KW), bias (OC) or undefined -> (B, OC, OH, OW).
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, int64_t stride = 1,
                int64_t padding = 0, MatmulPrecision precision = MatmulPrecision::F32);
// Inverted dropout: zeroes each element with probability p and scales survivors by 1/(1-p) in
// training; the identity otherwise. Randomness comes from gen.
Variable dropout(const Variable& x, double p, bool training, Generator& gen);
// Fused multi-head self-attention core (kernels/attention.h): qkv (B, N, 3D) packed as timm's
// qkv projection output -> (B, N, D). attn_dropout applies to the attention probabilities.
// When probs_out is given it receives the attention probabilities (B, NH, N, N) (before dropout).
Variable self_attention(const Variable& qkv, int64_t num_heads, double attn_dropout = 0.0, bool training = false,
                        Generator* gen = nullptr, Tensor* probs_out = nullptr);

}  // namespace vit
