// Basic layers (see layers.h). Initialisation follows torch.nn defaults.
#include "nn/layers.h"

#include "nn/init.h"

namespace vit::nn {

Linear::Linear(int64_t in_features_, int64_t out_features_, bool use_bias, Generator& gen)
    : in_features(in_features_), out_features(out_features_) {
  VIT_CHECK(in_features > 0 && out_features > 0, "linear", "features must be positive, got in={} out={}", in_features,
            out_features);
  Tensor w = Tensor::empty({out_features, in_features});
  init::default_weight_(w, in_features, gen);
  weight = register_parameter("weight", w);
  if (use_bias) {
    Tensor b = Tensor::empty({out_features});
    init::default_weight_(b, in_features, gen);
    bias = register_parameter("bias", b);
  }
}

Variable Linear::forward(const Variable& x) {
  if (!quantized()) return linear(x, weight, bias, precision);
  // w[n, k] = q[n, k] * scale[n], in the input's dtype (a constant of the graph: no gradient).
  const Tensor& q = weight.data();
  VIT_CHECK(q.dtype() == DType::I8 && q.dim() == 2 && weight_scale.dim() == 1 && weight_scale.size(0) == q.size(0) &&
                weight_scale.dtype() == DType::F32,
            "linear", "int8 weight {} {} with scale {} {}", dtype_name(q.dtype()), shape_str(q.shape()),
            dtype_name(weight_scale.dtype()), shape_str(weight_scale.shape()));
  Tensor w = Tensor::empty(q.shape(), x.data().dtype());
  const Tensor qc = q.contiguous(), sc = weight_scale.contiguous();
  const int8_t* qp = qc.data<int8_t>();
  const float* sp = sc.data<float>();
  const int64_t n = q.size(0), k = q.size(1);
  dispatch(w.dtype(), [&]<typename T>() {
    T* wp = w.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) wp[i * k + j] = static_cast<T>(qp[i * k + j]) * static_cast<T>(sp[i]);
    }
  });
  return linear(x, Variable(w, false), bias);
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool elementwise_affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  VIT_CHECK(!normalized_shape.empty() && shape_numel(normalized_shape) > 0, "layer_norm",
            "normalized_shape {} must be non-empty", shape_str(normalized_shape));
  VIT_CHECK(eps >= 0, "layer_norm", "eps must be >= 0, got {}", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape));
    bias = register_parameter("bias", Tensor::zeros(normalized_shape));
  }
}

Variable LayerNorm::forward(const Variable& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride_, int64_t padding_, bool use_bias,
               Generator& gen)
    : in_channels(in), out_channels(out), kernel_size(kernel), stride(stride_), padding(padding_) {
  VIT_CHECK(in > 0 && out > 0 && kernel > 0 && stride > 0 && padding >= 0, "conv2d",
            "invalid Conv2d(in={}, out={}, kernel={}, stride={}, padding={})", in, out, kernel, stride, padding);
  const int64_t fan_in = in * kernel * kernel;
  Tensor w = Tensor::empty({out, in, kernel, kernel});
  init::default_weight_(w, fan_in, gen);
  weight = register_parameter("weight", w);
  if (use_bias) {
    Tensor b = Tensor::empty({out});
    init::default_weight_(b, fan_in, gen);
    bias = register_parameter("bias", b);
  }
}

Variable Conv2d::forward(const Variable& x) { return conv2d(x, weight, bias, stride, padding, precision); }

BatchNorm2d::BatchNorm2d(int64_t features, double eps_, double momentum_)
    : num_features(features), eps(eps_), momentum(momentum_) {
  VIT_CHECK(features > 0, "batch_norm", "num_features must be > 0, got {}", features);
  VIT_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1, "batch_norm", "eps {} must be >= 0 and momentum {} in [0, 1]",
            eps, momentum);
  weight = register_parameter("weight", Tensor::ones({features}));
  bias = register_parameter("bias", Tensor::zeros({features}));
  running_mean = register_buffer("running_mean", Tensor::zeros({features}));
  running_var = register_buffer("running_var", Tensor::ones({features}));
}

Variable BatchNorm2d::forward(const Variable& x) {
  VIT_CHECK(x.dim() == 4, "batch_norm", "BatchNorm2d expects (B, C, H, W), got {}", shape_str(x.shape()));
  return batch_norm(x, running_mean.data(), running_var.data(), weight, bias, is_training(), momentum, eps);
}

void set_matmul_precision(Module& root, MatmulPrecision precision) {
  root.apply([precision](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m)) l->precision = precision;
    if (auto* c = dynamic_cast<Conv2d*>(&m)) c->precision = precision;
  });
}

Dropout::Dropout(double p_, GeneratorPtr gen) : p(p_), gen_(std::move(gen)) {
  VIT_CHECK(p >= 0.0 && p <= 1.0, "dropout", "probability must be in [0, 1], got {}", p);
  VIT_CHECK(gen_ != nullptr || p == 0.0, "dropout", "p={} needs a Generator", p);
}

Variable Dropout::forward(const Variable& x) {
  if (!is_training() || p == 0.0) return x;
  return dropout(x, p, true, *gen_);
}

DropPath::DropPath(double p_, GeneratorPtr gen) : p(p_), gen_(std::move(gen)) {
  VIT_CHECK(p >= 0.0 && p < 1.0, "drop_path", "probability must be in [0, 1), got {}", p);
  VIT_CHECK(gen_ != nullptr || p == 0.0, "drop_path", "p={} needs a Generator", p);
}

Variable DropPath::forward(const Variable& x) {
  if (!is_training() || p == 0.0) return x;
  // One keep/drop decision per sample: a (B, 1, ..., 1) mask broadcast over the rest.
  Shape mask_shape(x.dim(), 1);
  mask_shape[0] = x.size(0);
  Tensor mask = Tensor::empty(mask_shape, x.dtype());
  const double keep = 1.0 - p;
  const bool keyed = gen_->sample_keyed();  // per-sample streams (Generator::key_by_sample)
  const uint64_t call = keyed ? gen_->next_call() : 0;
  for (int64_t b = 0; b < x.size(0); ++b) {
    std::vector<int64_t> index(x.dim(), 0);
    index[0] = b;
    const double u = keyed ? gen_->sample_stream(call, b).uniform_double() : gen_->uniform_double();
    mask.set(index, u < keep ? 1.0 / keep : 0.0);
  }
  return mul(x, Variable(mask));
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  VIT_CHECK(module != nullptr, "sequential", "null module");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Variable Sequential::forward(const Variable& x) {
  Variable y = x;
  for (auto& m : modules_) y = m->forward(y);
  return y;
}

}  // namespace vit::nn
