// DeiT's distillation loss and the teacher (see distillation.h).
#include "train/distillation.h"

#include "core/check.h"

namespace vit::train {

Variable distillation_term(const Variable& dist_logits, const Tensor& teacher_logits, const DistillationSettings& s,
                           int64_t normalizer) {
  VIT_CHECK(dist_logits.dim() == 2 && teacher_logits.shape() == dist_logits.shape(), "distillation",
            "student logits {} and teacher logits {} must both be (B, K)", shape_str(dist_logits.shape()),
            shape_str(teacher_logits.shape()));
  VIT_CHECK(normalizer > 0, "distillation", "normalizer must be positive, got {}", normalizer);
  const int64_t n = dist_logits.size(0), K = dist_logits.size(1);
  const double share = static_cast<double>(n) / static_cast<double>(normalizer);
  if (s.type == "hard") {
    const Tensor teacher_labels = argmax(Variable(teacher_logits), 1);  // (n)
    return cross_entropy(dist_logits, teacher_labels) * (s.alpha * share);
  }
  VIT_CHECK(s.type == "soft", "distillation", "type must be hard or soft, got '{}'", s.type);
  // KL(p_t || p_s) summed over rows and classes: sum p_t (log p_t - log p_s).
  const Tensor log_teacher = log_softmax(Variable(teacher_logits) / s.tau, 1).data();  // (n, K)
  const Variable log_student = log_softmax(dist_logits / s.tau, 1);                    // (n, K)
  const Variable teacher_probs(exp(Variable(log_teacher)).data());
  const Variable kl = sum(teacher_probs * (Variable(log_teacher) - log_student));
  return kl * (s.alpha * s.tau * s.tau / (static_cast<double>(normalizer) * static_cast<double>(K)));
}

namespace {

infer::LoadedModel load_teacher(const std::string& path, const model::ViTConfig& student) {
  infer::LoadOptions options;
  options.image_size = student.image_size;
  try {
    return infer::load_model(path, options);
  } catch (const Error& e) {
    fail("train", "--teacher {}: {}", path, e.what());
  }
}

}  // namespace

Teacher::Teacher(const std::string& path, const model::ViTConfig& student) : model_(load_teacher(path, student)) {
  const model::ViTConfig& t = model_.config();
  model_.require_classifier("train", "--teacher " + path, "a teacher must predict the student's classes");
  VIT_CHECK(t.num_classes == student.num_classes, "train",
            "--teacher {}: the teacher has {} classes, the student {} (they must predict the same classes)", path,
            t.num_classes, student.num_classes);
  VIT_CHECK(t.in_channels == student.in_channels, "train",
            "--teacher {}: the teacher takes {} channels, the student {}", path, t.in_channels, student.in_channels);
  VIT_CHECK(t.image_size == student.image_size, "train",
            "--teacher {}: the teacher runs at {} pixels, the student at {}", path, t.image_size, student.image_size);
  model_.prepare();
}

Tensor Teacher::logits(const Tensor& images) { return model_.run({infer::Output::Logits}, images); }

}  // namespace vit::train
