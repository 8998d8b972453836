// The basic layers, with PyTorch's parameter shapes, defaults and initialisation:
// Linear, LayerNorm, Conv2d, BatchNorm2d, Dropout, DropPath, activations (ReLU, GELU, Tanh, Softmax),
// Identity and Sequential.
#pragma once

#include "nn/module.h"

namespace vit::nn {

// y = x W^T + b over any leading dims. weight (out, in), bias (out).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  Variable forward(const Variable& x) override;
  int64_t in_features, out_features;
  Variable weight, bias;  // bias undefined when bias=false
  // An int8 Linear (`vit quantize`, kernels/gemm/int8_gemm.h): `weight` holds the int8 values (out, in)
  // and weight_scale (out) their per-channel scales. The inference session runs the int8 kernel
  // on them; forward() here (the autograd graph: attention maps, --graph) uses the dequantised
  // weights, without gradients. Undefined for a float32 Linear. weight_bits: 8 (values in
  // [-127, 127], scheme vit-int8-2) or 7 ([-63, 63], vit-int8-1); read only when quantized.
  Tensor weight_scale;
  int weight_bits = 8;
  bool quantized() const { return weight_scale.defined(); }
  // The GEMMs' arithmetic in forward and backward (autograd's MatmulPrecision): float32, or bf16
  // for mixed-precision training (set_matmul_precision). An int8 Linear runs float32.
  MatmulPrecision precision = MatmulPrecision::F32;
};

// Normalises over the trailing normalized_shape dims with population variance.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Variable forward(const Variable& x) override;
  Shape normalized_shape;
  double eps;
  Variable weight, bias;  // ones / zeros, undefined without elementwise_affine
};

// 2-d convolution (groups = dilation = 1). weight (out, in, k, k), bias (out).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding, bool bias,
         Generator& gen);
  Variable forward(const Variable& x) override;
  int64_t in_channels, out_channels, kernel_size, stride, padding;
  Variable weight, bias;
  MatmulPrecision precision = MatmulPrecision::F32;  // as Linear's
};

// Batch normalisation over the channels of (B, C, H, W) (torch.nn.BatchNorm2d, same names):
// weight / bias (C) ones / zeros; buffers running_mean / running_var (C) zeros / ones, moved toward
// each training batch's statistics with `momentum` and used in evaluation. PyTorch's
// num_batches_tracked counter is not kept (it matters only for momentum=None, which this does not
// offer); foreign state dicts' copies of it are set aside by the layouts that read them.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  Variable forward(const Variable& x) override;
  int64_t num_features;
  double eps, momentum;
  Variable weight, bias, running_mean, running_var;
};

// Sets the matmul precision of every Linear and Conv2d below root (root included): BF16 is
// PyTorch's CPU autocast for them (bf16 operands, float32 accumulation; the parameters, their
// gradients and every other op stay float32). `vit train --precision bf16` sets it on its model.
void set_matmul_precision(Module& root, MatmulPrecision precision);

// Inverted dropout; identity in eval mode.
class Dropout : public Module {
 public:
  Dropout(double p, GeneratorPtr gen);
  Variable forward(const Variable& x) override;
  double p;

 private:
  GeneratorPtr gen_;
};

// Stochastic depth (timm's DropPath): in training, drops the whole residual branch of a sample
// with probability p and scales kept samples by 1/(1-p); identity in eval mode.
class DropPath : public Module {
 public:
  DropPath(double p, GeneratorPtr gen);
  Variable forward(const Variable& x) override;
  double p;

 private:
  GeneratorPtr gen_;
};

class ReLU : public Module {
 public:
  Variable forward(const Variable& x) override { return relu(x); }
};
class GELU : public Module {
 public:
  explicit GELU(bool tanh_form = false) : tanh_approximation(tanh_form) {}
  Variable forward(const Variable& x) override { return gelu(x, tanh_approximation); }
  bool tanh_approximation;
};
// QuickGELU (OpenAI CLIP): x * sigmoid(1.702 x).
class QuickGELU : public Module {
 public:
  Variable forward(const Variable& x) override { return x * sigmoid(x * 1.702); }
};
class Tanh : public Module {
 public:
  Variable forward(const Variable& x) override { return tanh(x); }
};
class Softmax : public Module {
 public:
  explicit Softmax(int64_t softmax_dim) : dim(softmax_dim) {}
  Variable forward(const Variable& x) override { return softmax(x, dim); }
  int64_t dim;
};
class Identity : public Module {
 public:
  Variable forward(const Variable& x) override { return x; }
};

// Applies its children in order; they are named "0", "1", ... as in PyTorch.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Variable forward(const Variable& x) override;
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Mean cross-entropy over logits (B, K) and int64 targets (B), with label smoothing.
struct CrossEntropyLoss {
  double label_smoothing = 0.0;
  Variable operator()(const Variable& logits, const Tensor& targets) const {
    return cross_entropy(logits, targets, label_smoothing);
  }
};

}  // namespace vit::nn
