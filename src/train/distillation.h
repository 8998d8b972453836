// DeiT's knowledge distillation (Touvron et al. 2021, facebookresearch/deit losses.py): a student
// with a distillation token trains its class head on the labels and its distillation head on a
// teacher's predictions:
//   hard: (1 - alpha) * CE(head(x_cls), labels) + alpha * CE(head_dist(x_dist), argmax(teacher))
//   soft: (1 - alpha) * CE(head(x_cls), labels)
//         + alpha * tau^2 * KL(softmax(teacher / tau) || softmax(head_dist(x_dist) / tau)) / (B x K)
// (DeiT's soft term sums the KL over the batch and divides by the logits' element count; kept as
// it is.) The class-head term takes label smoothing and mixup as the plain loss does. The teacher
// is any model `vit` loads for inference (ours, timm, torchvision, Hugging Face, int8), run
// without a graph on the student's input batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "infer/predictor.h"
#include "model/vit_config.h"

namespace vit::train {

struct DistillationSettings {
  std::string type = "hard";  // "hard" or "soft"
  double alpha = 0.5;         // weight of the distillation head's term
  double tau = 1.0;           // soft: temperature
};

// The distillation part of the loss for rows of a batch, already divided by `normalizer` rows
// (the global batch size, so slices over threads and ranks sum to the batch mean):
//   hard: alpha * sum_i CE_i(dist_logits, argmax(teacher_logits)) / normalizer
//   soft: alpha * tau^2 * sum_i KL_i / (normalizer x K)
// dist_logits (n, K), teacher_logits (n, K).
Variable distillation_term(const Variable& dist_logits, const Tensor& teacher_logits, const DistillationSettings& s,
                           int64_t normalizer);

// A teacher model loaded for inference, resampled to the student's image size when it differs
// (its position table, as `--image-size` does for inference). Its classes are matched to the
// student's by name, never by position: its logits are reordered (and a larger teacher's cut) to
// the student's outputs.
class Teacher {
 public:
  // `class_names`: the student's, one per output (the outputs beyond them are named by number, as
  // load_model names them); `heads` > 0: the teacher's head count (--teacher-heads).
  // Throws "[train] --teacher FILE: ..." when the file does not load, has no classifier head, lacks
  // some of the student's class names (named), or its channels or patch grid do not fit the student.
  Teacher(const std::string& path, const model::ViTConfig& student, const std::vector<std::string>& class_names,
          int64_t heads = 0);
  // (B, C, H, W) -> (B, K) logits in the student's class order, no graph.
  Tensor logits(const Tensor& images);
  const infer::LoadedModel& loaded() const { return model_.loaded(); }
  // The teacher's output of each student output (identity when the names are in the same order).
  const std::vector<int64_t>& columns() const { return columns_; }

 private:
  infer::Predictor model_;
  std::vector<int64_t> columns_;
  bool reordered_ = false;
};

}  // namespace vit::train
