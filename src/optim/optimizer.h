// Optimisers over named parameters (float32): SGD with momentum and AdamW with decoupled
// weight decay, as torch.optim computes them. Which parameters weight decay reaches is the
// caller's choice (set_decayed); by default timm's rule, the `vit train` convention: parameters
// with fewer than 2 dims (biases, LayerNorm) and cls_token / pos_embed are never decayed. State
// is name -> tensor so it can be saved in a checkpoint and restored exactly. A tensor given twice is
// refused (it would be stepped twice).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace vit::optim {

using NamedParameters = std::vector<std::pair<std::string, Variable>>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// timm's rule: decay weights of >= 2 dims except cls_token / dist_token / pos_embed (timm's
// VisionTransformer.no_weight_decay(); also *.cls_token ...).
bool decays(const std::string& name, const Variable& p);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  explicit Optimizer(NamedParameters params);
  // One update from the parameters' .grad (a parameter without .grad is skipped).
  virtual void step() = 0;
  void zero_grad();
  double lr = 1e-3;
  int64_t steps() const { return step_; }
  // Optimiser state (moments, step) for checkpoints; load checks names and shapes.
  virtual NamedTensors state() const = 0;
  virtual void load_state(const NamedTensors& state) = 0;
  const NamedParameters& parameters() const { return params_; }
  // Per-parameter multipliers of lr (timm's param-group "lr_scale": layer-wise decay, a head's own
  // rate), one per parameter in order; empty: 1 for all. Weight decay scales with them, as in a
  // torch param group whose lr is lr x scale.
  void set_lr_scales(std::vector<double> scales);
  double lr_scale(size_t i) const { return lr_scales_.empty() ? 1.0 : lr_scales_[i]; }
  // Which parameters weight decay applies to, one flag per parameter in order; empty (the
  // default): timm's rule, decays(name, p). torch.optim decays every parameter of a group (the
  // Python door passes all true).
  void set_decayed(std::vector<bool> decayed);
  bool decayed(size_t i) const;

 protected:
  NamedParameters params_;
  std::vector<double> lr_scales_;
  std::vector<bool> decayed_;
  int64_t step_ = 0;
  const Tensor& find(const NamedTensors& state, const std::string& key, const Shape& shape) const;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedParameters params, double lr, double weight_decay = 0.05, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8);
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;
  double weight_decay, beta1, beta2, eps;

 private:
  std::vector<Tensor> m_, v_;
};

class SGD : public Optimizer {
 public:
  SGD(NamedParameters params, double lr, double momentum = 0.9, double weight_decay = 0.0, bool nesterov = false);
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;
  double momentum, weight_decay;
  bool nesterov;

 private:
  std::vector<Tensor> buf_;
};

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before
// clipping (torch.nn.utils.clip_grad_norm_). A non-finite norm is returned unchanged.
double clip_grad_norm(const NamedParameters& params, double max_norm);
// The same with the gradients' global norm already computed (grad_norm): no second pass to find it.
void clip_grad_norm(const NamedParameters& params, double max_norm, double norm);
double grad_norm(const NamedParameters& params);

// Linear warmup from 0 to base_lr over warmup_steps, then cosine decay to min_lr at total_steps.
double warmup_cosine_lr(int64_t step, int64_t warmup_steps, int64_t total_steps, double base_lr, double min_lr);

// The same schedule when its length changed along the way (a time-budgeted run re-planned at an
// epoch end): segments[0] = {0, T0} is the first plan, segments[k] = {s_k, T_k} from step s_k on
// (s_k >= warmup_steps, increasing). The cosine's progress is continuous: from s_k it covers what
// was left of it over the T_k - s_k steps then left. With fewer than two segments it is
// warmup_cosine_lr over the one total.
double replanned_cosine_lr(int64_t step, int64_t warmup_steps, const std::vector<std::vector<int64_t>>& segments,
                           int64_t total_steps, double base_lr, double min_lr);

// Exponential moving average of the parameters (weights used for evaluation).
class ModelEma {
 public:
  ModelEma(const NamedParameters& params, double decay);
  // avg = d * avg + (1 - d) * param with d = decay.
  void update(const NamedParameters& params);
  // The same after optimiser step `step` (0-based) with TensorFlow's warmup (its
  // ExponentialMovingAverage num_updates): d = min(decay, (1 + step) / (10 + step)), so a short
  // run's average is not stuck at the initial weights (0.999 is reached after ~9,000 steps; a
  // long run's average is the same to float rounding, the early terms having decayed away).
  void update(const NamedParameters& params, int64_t step);
  static double warmed_up(double decay, int64_t step);
  const NamedTensors& averages() const { return ema_; }
  NamedTensors& averages() { return ema_; }
  double decay;

 private:
  void update_with(const NamedParameters& params, double d);
  NamedTensors ema_;
};

}  // namespace vit::optim
