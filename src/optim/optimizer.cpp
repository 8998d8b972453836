// Optimisers, clipping, schedule and EMA (see optimizer.h).
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "kernels/optim.h"

namespace vit::optim {

bool decays(const std::string& name, const Variable& p) {
  const std::string last = name.substr(name.rfind('.') + 1);
  if (last == "cls_token" || last == "pos_embed" || last == "dist_token") return false;  // timm's no_weight_decay()
  return p.dim() >= 2;
}

Optimizer::Optimizer(NamedParameters params) : params_(std::move(params)) {
  std::unordered_map<const Node*, size_t> first;  // each parameter's first position
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    VIT_CHECK(p.defined() && p.dtype() == DType::F32 && p.data().is_contiguous(), "optimizer",
              "parameter '{}' must be a contiguous float32 tensor", name);
    const auto [at, fresh] = first.emplace(p.node().get(), i);
    VIT_CHECK(fresh, "optimizer",
              "parameters {} and {} are the same tensor: it would be updated twice per step (give each parameter once)",
              params_[at->second].first, name);
  }
}

void Optimizer::set_lr_scales(std::vector<double> scales) {
  VIT_CHECK(scales.empty() || scales.size() == params_.size(), "optimizer", "{} lr scales for {} parameters",
            scales.size(), params_.size());
  for (double s : scales) VIT_CHECK(std::isfinite(s) && s >= 0, "optimizer", "lr scale {} is not >= 0", s);
  lr_scales_ = std::move(scales);
}

void Optimizer::set_decayed(std::vector<bool> decayed) {
  VIT_CHECK(decayed.empty() || decayed.size() == params_.size(), "optimizer", "{} weight decay flags for {} parameters",
            decayed.size(), params_.size());
  decayed_ = std::move(decayed);
}

bool Optimizer::decayed(size_t i) const {
  return decayed_.empty() ? decays(params_[i].first, params_[i].second) : decayed_[i];
}

void Optimizer::zero_grad() {
  for (auto& [_, p] : params_) Variable(p).set_grad(Tensor());
}

const Tensor& Optimizer::find(const NamedTensors& state, const std::string& key, const Shape& shape) const {
  for (const auto& [k, t] : state) {
    if (k != key) continue;
    VIT_CHECK(t.shape() == shape, "optimizer", "state '{}': expected shape {}, got {}", key, shape_str(shape),
              shape_str(t.shape()));
    return t;
  }
  fail("optimizer", "state '{}' missing from the checkpoint", key);
}

AdamW::AdamW(NamedParameters params, double lr_, double weight_decay_, double beta1_, double beta2_, double eps_)
    : Optimizer(std::move(params)), weight_decay(weight_decay_), beta1(beta1_), beta2(beta2_), eps(eps_) {
  lr = lr_;
  VIT_CHECK(lr >= 0 && weight_decay >= 0 && beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0, "adamw",
            "invalid hyper-parameters lr={} weight_decay={} betas=({}, {}) eps={}", lr, weight_decay, beta1, beta2,
            eps);
  for (const auto& [_, p] : params_) {
    m_.push_back(Tensor::zeros(p.shape()));
    v_.push_back(Tensor::zeros(p.shape()));
  }
}

void AdamW::step() {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    if (!p.grad().defined()) continue;
    const double wd = decayed(i) ? weight_decay : 0.0;
    kernels::adamw_update(p.data().data<float>(), p.grad().data<float>(), m_[i].data<float>(), v_[i].data<float>(),
                          p.numel(), lr * lr_scale(i), beta1, beta2, eps, wd, step_);
    p.data().bump_version();  // an in-place change: a graph that saved p refuses its backward
  }
}

NamedTensors AdamW::state() const {
  NamedTensors out{{"step", Tensor::scalar(static_cast<double>(step_), DType::F64)}};
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("exp_avg." + params_[i].first, m_[i]);
    out.emplace_back("exp_avg_sq." + params_[i].first, v_[i]);
  }
  return out;
}

void AdamW::load_state(const NamedTensors& state) {
  const auto step = static_cast<int64_t>(find(state, "step", {}).item());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    m_[i].copy_(find(state, "exp_avg." + name, p.shape()));
    v_[i].copy_(find(state, "exp_avg_sq." + name, p.shape()));
  }
  step_ = step;
}

SGD::SGD(NamedParameters params, double lr_, double momentum_, double weight_decay_, bool nesterov_)
    : Optimizer(std::move(params)), momentum(momentum_), weight_decay(weight_decay_), nesterov(nesterov_) {
  lr = lr_;
  VIT_CHECK(lr >= 0 && momentum >= 0 && weight_decay >= 0, "sgd",
            "invalid hyper-parameters lr={} momentum={} "
            "weight_decay={}",
            lr, momentum, weight_decay);
  for (const auto& [_, p] : params_) buf_.push_back(Tensor::zeros(p.shape()));
}

void SGD::step() {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    if (!p.grad().defined()) continue;
    const double wd = decayed(i) ? weight_decay : 0.0;
    kernels::sgd_update(p.data().data<float>(), p.grad().data<float>(), buf_[i].data<float>(), p.numel(),
                        lr * lr_scale(i), momentum, wd, nesterov, step_ == 1);
    p.data().bump_version();
  }
}

NamedTensors SGD::state() const {
  NamedTensors out{{"step", Tensor::scalar(static_cast<double>(step_), DType::F64)}};
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("momentum_buffer." + params_[i].first, buf_[i]);
  return out;
}

void SGD::load_state(const NamedTensors& state) {
  const auto step = static_cast<int64_t>(find(state, "step", {}).item());
  for (size_t i = 0; i < params_.size(); ++i) {
    buf_[i].copy_(find(state, "momentum_buffer." + params_[i].first, params_[i].second.shape()));
  }
  step_ = step;
}

double grad_norm(const NamedParameters& params) {
  double sq = 0.0;
  for (const auto& [_, p] : params) {
    if (p.grad().defined()) sq += kernels::sum_squares(p.grad().data<float>(), p.numel());
  }
  return std::sqrt(sq);
}

double clip_grad_norm(const NamedParameters& params, double max_norm) {
  const double norm = grad_norm(params);
  clip_grad_norm(params, max_norm, norm);
  return norm;
}

void clip_grad_norm(const NamedParameters& params, double max_norm, double norm) {
  VIT_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be positive, got {}", max_norm);
  if (!std::isfinite(norm)) return;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    for (const auto& [_, p] : params) {
      if (p.grad().defined()) kernels::scale_inplace(p.grad().data<float>(), p.numel(), static_cast<float>(coef));
    }
  }
}

double warmup_cosine_lr(int64_t step, int64_t warmup_steps, int64_t total_steps, double base_lr, double min_lr) {
  if (warmup_steps > 0 && step < warmup_steps) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const int64_t decay_steps = std::max<int64_t>(total_steps - warmup_steps, 1);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double replanned_cosine_lr(int64_t step, int64_t warmup_steps, const std::vector<std::vector<int64_t>>& segments,
                           int64_t total_steps, double base_lr, double min_lr) {
  if (segments.size() < 2 || step < warmup_steps) {
    return warmup_cosine_lr(step, warmup_steps, total_steps, base_lr, min_lr);
  }
  // Progress through the cosine at `step`, segment by segment.
  double progress = 0.0;
  int64_t from = warmup_steps, to = std::max<int64_t>(segments[0].at(1), warmup_steps + 1);
  double start = 0.0;  // progress at `from`
  for (size_t k = 1; k < segments.size() && segments[k].at(0) <= step; ++k) {
    const int64_t s = std::max<int64_t>(segments[k].at(0), warmup_steps);
    start += (1.0 - start) *
             std::min(1.0, static_cast<double>(s - from) / static_cast<double>(std::max<int64_t>(to - from, 1)));
    from = s;
    to = std::max<int64_t>(segments[k].at(1), s + 1);
  }
  progress = start + (1.0 - start) * std::min(1.0, static_cast<double>(step - from) /
                                                       static_cast<double>(std::max<int64_t>(to - from, 1)));
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

ModelEma::ModelEma(const NamedParameters& params, double decay_) : decay(decay_) {
  VIT_CHECK(decay > 0 && decay < 1, "ema", "decay must be in (0, 1), got {}", decay);
  for (const auto& [name, p] : params) ema_.emplace_back(name, p.data().clone());
}

void ModelEma::update(const NamedParameters& params) { update_with(params, decay); }

double ModelEma::warmed_up(double decay, int64_t step) {
  return std::min(decay, static_cast<double>(1 + step) / static_cast<double>(10 + step));
}

void ModelEma::update(const NamedParameters& params, int64_t step) { update_with(params, warmed_up(decay, step)); }

void ModelEma::update_with(const NamedParameters& params, double d) {
  VIT_ASSERT(params.size() == ema_.size());
  for (size_t i = 0; i < params.size(); ++i) {
    kernels::ema_update(ema_[i].second.data<float>(), params[i].second.data().data<float>(), params[i].second.numel(),
                        d);
  }
}

}  // namespace vit::optim
