// DeiT's distillation loss and the teacher (see distillation.h).
#include "train/distillation.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>

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

infer::LoadedModel load_teacher(const std::string& path, const model::ViTConfig& student, int64_t heads) {
  infer::LoadSettings options;
  options.image_size = student.image_size;
  options.num_heads = heads;
  try {
    return infer::load_model(path, options);
  } catch (const Error& e) {
    // The loader's advice names its own flag; the teacher's is --teacher-heads (--heads is the student's).
    std::string message = e.what();
    for (size_t at = message.find("--heads"); at != std::string::npos; at = message.find("--heads", at + 15)) {
      message.replace(at, 7, "--teacher-heads");
    }
    fail("train", "--teacher {}: {}", path, message);
  }
}

// The teacher's output of each of the student's classes, by name: all must be there.
std::vector<int64_t> match_classes(const std::string& path, const std::vector<std::string>& teacher_names,
                                   std::vector<std::string> student_names, int64_t student_classes) {
  VIT_CHECK(static_cast<int64_t>(student_names.size()) <= student_classes, "train",
            "--teacher {}: the student has {} class names but {} outputs", path, student_names.size(), student_classes);
  for (auto k = static_cast<int64_t>(student_names.size()); k < student_classes; ++k) {
    student_names.push_back(std::to_string(k));
  }
  std::map<std::string, int64_t> at;
  for (size_t k = 0; k < teacher_names.size(); ++k) at.emplace(teacher_names[k], static_cast<int64_t>(k));
  std::vector<int64_t> columns;
  std::vector<std::string> unknown;
  for (const std::string& name : student_names) {
    const auto it = at.find(name);
    if (it == at.end()) {
      unknown.push_back(name);
    } else {
      columns.push_back(it->second);
    }
  }
  if (!unknown.empty()) {
    const size_t shown = std::min<size_t>(unknown.size(), 10), shown_t = std::min<size_t>(teacher_names.size(), 10);
    fail("train",
         "--teacher {}: the teacher does not predict the student's class{} '{}'{} (classes are matched by name, never "
         "by position); the teacher's classes are [{}{}]",
         path, unknown.size() == 1 ? "" : "es",
         fmt::join(unknown.begin(), unknown.begin() + static_cast<long>(shown), "', '"),
         unknown.size() > shown ? fmt::format(" and {} more", unknown.size() - shown) : "",
         fmt::join(teacher_names.begin(), teacher_names.begin() + static_cast<long>(shown_t), ", "),
         teacher_names.size() > shown_t ? fmt::format(", ... ({} in all)", teacher_names.size()) : "");
  }
  return columns;
}

}  // namespace

Teacher::Teacher(const std::string& path, const model::ViTConfig& student, const std::vector<std::string>& class_names,
                 int64_t heads)
    : model_(load_teacher(path, student, heads)) {
  const model::ViTConfig& t = model_.config();
  model_.require_classifier("train", "--teacher " + path, "a teacher must predict the student's classes");
  columns_ = match_classes(path, model_.loaded().class_names, class_names, student.num_classes);
  for (size_t k = 0; k < columns_.size(); ++k) reordered_ = reordered_ || columns_[k] != static_cast<int64_t>(k);
  reordered_ = reordered_ || t.num_classes != student.num_classes;
  VIT_CHECK(t.in_channels == student.in_channels, "train",
            "--teacher {}: the teacher takes {} channels, the student {}", path, t.in_channels, student.in_channels);
  VIT_CHECK(t.image_size == student.image_size, "train",
            "--teacher {}: the teacher runs at {} pixels, the student at {}", path, t.image_size, student.image_size);
  model_.prepare();
}

Tensor Teacher::logits(const Tensor& images) {
  const Tensor all = model_.run({infer::Output::Logits}, images);  // (B, K teacher)
  return reordered_ ? index_select(all, 1, columns_) : all;        // (B, K student)
}

}  // namespace vit::train
