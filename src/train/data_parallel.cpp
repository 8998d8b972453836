// Data-parallel forward/backward (see data_parallel.h).
#include "train/data_parallel.h"

#include <omp.h>

#include <tuple>

namespace vit::train {
namespace {

// Loss of rows [begin, end) of the batch, scaled by their share of the global batch so that the
// slices' losses (and gradients) over every thread and rank sum to the global batch's mean; also
// counts top-1 hits. With a teacher (distillation.h), DeiT's loss: the class head on the labels
// and the distillation head on the teacher's logits of these rows.
Variable slice_loss(model::VisionTransformer& model, const data::Batch& batch, int64_t begin, int64_t end,
                    double label_smoothing, const Tensor* teacher_logits, const DistillationSettings& distill,
                    int64_t& correct) {
  const int64_t global = batch.global_size > 0 ? batch.global_size : batch.targets.numel();
  const double share = static_cast<double>(end - begin) / static_cast<double>(global);
  const Tensor targets = batch.targets.slice(0, begin, end).contiguous();
  const Variable images(batch.images.slice(0, begin, end));
  Variable logits, dist_logits;  // (n, K)
  if (teacher_logits != nullptr) {
    std::tie(logits, dist_logits) = model.forward_distilled(images);
  } else {
    logits = model(images);
  }
  Variable loss = cross_entropy(logits, targets, label_smoothing);
  if (batch.lam < 1.0) {
    const Tensor targets_b = batch.targets_b.slice(0, begin, end).contiguous();
    loss = loss * batch.lam + cross_entropy(logits, targets_b, label_smoothing) * (1.0 - batch.lam);
  }
  Tensor predicted;
  if (teacher_logits != nullptr) {
    loss = loss * ((1.0 - distill.alpha) * share) +
           distillation_term(dist_logits, teacher_logits->slice(0, begin, end).contiguous(), distill, global);
    predicted = argmax(Variable(logits.data()) + Variable(dist_logits.data()), 1);  // inference's answer: the mean
  } else {
    predicted = argmax(logits, 1);
    loss = loss * share;
  }
  for (int64_t i = 0; i < end - begin; ++i) correct += predicted.data<int64_t>()[i] == targets.data<int64_t>()[i];
  return loss;
}

}  // namespace

DataParallel::DataParallel(model::VisionTransformer& master, int replicas, distributed::Comm& comm)
    : master_(master), comm_(comm) {
  const auto master_params = master.named_parameters();
  // Only the parameters that train (all but a frozen backbone's) have gradients to reduce.
  auto trained = [&](const GradientReducer::Parameters& params) {
    GradientReducer::Parameters out;
    for (size_t i = 0; i < params.size(); ++i) {
      if (master_params[i].second.requires_grad()) out.push_back(params[i]);
    }
    return out;
  };
  std::vector<GradientReducer::Parameters> all{trained(master_params)};
  for (int r = 1; r < replicas; ++r) {
    auto replica = std::make_unique<model::VisionTransformer>(master.config(), std::make_shared<Generator>(0));
    auto params = replica->named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].second.node()->data = master_params[i].second.data();
      if (!master_params[i].second.requires_grad()) params[i].second.requires_grad_(false);
    }
    all.push_back(trained(params));
    replicas_.push_back(std::move(replica));
  }
  if (replicas > 1 || comm.distributed()) reducer_ = std::make_unique<GradientReducer>(std::move(all), comm);
}

void DataParallel::set_matmul_precision(MatmulPrecision precision) {
  nn::set_matmul_precision(master_, precision);
  for (auto& replica : replicas_) nn::set_matmul_precision(*replica, precision);
}

void DataParallel::reseed(uint64_t seed, int64_t step) {
  key_ = data::mix_seed(seed, 0xD50, static_cast<uint64_t>(step));
}

void DataParallel::average_buffers(int replicas_run) {
  const auto master = master_.named_buffers();
  if (master.empty()) return;
  std::vector<std::vector<std::pair<std::string, Variable>>> others;
  for (int r = 1; r < replicas_run; ++r) others.push_back(replicas_[r - 1]->named_buffers());
  std::vector<double> sums;
  for (size_t i = 0; i < master.size(); ++i) {
    const Tensor m = master[i].second.data().to(DType::F64).contiguous();
    std::vector<double> v(m.data<double>(), m.data<double>() + m.numel());
    for (const auto& buffers : others) {
      const Tensor o = buffers[i].second.data().to(DType::F64).contiguous();
      for (size_t k = 0; k < v.size(); ++k) v[k] += o.data<double>()[k];
    }
    for (double& x : v) x /= static_cast<double>(replicas_run);  // this rank's mean first: ranks may run fewer
    sums.insert(sums.end(), v.begin(), v.end());
  }
  if (comm_.distributed()) comm_.sum(sums);
  const double count = comm_.distributed() ? static_cast<double>(comm_.size()) : 1.0;
  size_t at = 0;
  for (size_t i = 0; i < master.size(); ++i) {
    Tensor dst = master[i].second.data();
    Tensor mean = Tensor::empty(dst.shape(), DType::F64);
    for (int64_t k = 0; k < dst.numel(); ++k) mean.data<double>()[k] = sums[at++] / count;
    dst.copy_(mean);
  }
}

DataParallel::StepResult DataParallel::forward_backward(const data::Batch& batch, double label_smoothing) {
  master_.zero_grad();
  const bool training = master_.is_training();
  const int64_t B = batch.targets.numel();
  const int R = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(replicas(), B)));
  StepResult result;
  // The teacher's logits for this process's rows, with every thread (its inference session).
  Tensor teacher_logits;
  if (teacher_ != nullptr) teacher_logits = teacher_->logits(batch.images);
  const Tensor* teacher = teacher_ != nullptr ? &teacher_logits : nullptr;
  if (!reducer_) {  // one thread, one process: the gradient lands in the master directly
    master_.generator()->key_by_sample(key_, batch.first);
    Variable loss = slice_loss(master_, batch, 0, B, label_smoothing, teacher, distill_, result.correct);
    result.loss = loss.item();
    if (std::isfinite(result.loss)) loss.backward();
    return result;
  }
  reducer_->begin(R);
  const auto master_buffers = master_.named_buffers();
  for (int r = 1; r < R; ++r) {  // every replica starts the step from the master's statistics
    const auto buffers = replicas_[r - 1]->named_buffers();
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.data().copy_(master_buffers[i].second.data());
  }
  std::vector<double> losses(R, 0.0);
  std::vector<int64_t> correct(R, 0);
  std::vector<std::exception_ptr> errors(R);
  const int previous_levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);  // ops inside a replica run single-threaded (as does BLAS)
#pragma omp parallel num_threads(R) if (R > 1)
  {
    const int r = omp_get_thread_num();
    try {
      model::VisionTransformer& model = r == 0 ? master_ : *replicas_[r - 1];
      model.train(training);
      if (r > 0) model.zero_grad();
      const int64_t begin = B * r / R, end = B * (r + 1) / R;
      model.generator()->key_by_sample(key_, batch.first + begin);
      Variable loss = slice_loss(model, batch, begin, end, label_smoothing, teacher, distill_, correct[r]);
      losses[r] = loss.item();
      if (std::isfinite(losses[r]))
        loss.backward(Tensor::ones(loss.shape(), loss.dtype()), [&](Node* leaf) { reducer_->ready(r, leaf); });
    } catch (...) {
      errors[r] = std::current_exception();
    }
  }
  omp_set_max_active_levels(previous_levels);
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  // The buckets not yet started, the waits, the total into the master's .grad.
  reducer_->finish();
  average_buffers(R);
  for (int r = 0; r < R; ++r) {
    result.loss += losses[r];
    result.correct += correct[r];
  }
  return result;
}

}  // namespace vit::train
