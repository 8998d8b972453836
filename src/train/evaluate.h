// Evaluation of a classifier on a dataset: mean cross-entropy, top-1 / top-5 accuracy,
// per-class accuracy, the confusion matrix, and which images were misclassified.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "infer/request.h"
#include "model/vision_transformer.h"

namespace vit::train {

// Test-time augmentation: None scores each image once; Flip averages the class probabilities of
// the image and its horizontal mirror (`vit eval --tta flip`; reported beside the plain number,
// never instead of it).
enum class Tta { None, Flip };
Tta parse_tta(const std::string& name);  // "none" or "flip"; anything else is refused by name
const char* tta_name(Tta tta);

struct EvalResult {
  int64_t count = 0;
  double loss = 0.0, top1 = 0.0, top5 = 0.0;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  std::vector<double> per_class_accuracy;
  std::vector<int64_t> predictions;  // per image, dataset order
  std::vector<float> confidence;     // probability of the predicted class
};

// Data-parallel evaluation: process `part` of `parts` evaluates its share of the images
// (data::BatchSlice::share of the whole set) and `sum` adds a vector of numbers element-wise over
// the processes (an allreduce); every process then holds the whole set's result.
struct EvalShard {
  int64_t part = 0, parts = 1;
  std::function<void(std::vector<double>&)> sum;
};

// Runs in eval mode without gradients (restores the previous mode), through the inference session
// where the model allows it (else the graph). precision BF16: the session's Linear layers in
// bfloat16 (`vit eval --precision bf16`, infer/inference.h); a model only the graph runs refuses it.
// tta Flip: each result is the two views' mean probabilities (the loss is -log of that mean at the
// true class).
EvalResult evaluate(model::VisionTransformer& model, const data::Dataset& data, const data::Normalization& norm,
                    int64_t batch_size = 500, const EvalShard& shard = {},
                    infer::Precision precision = infer::Precision::F32, Tta tta = Tta::None);

// The images (B, C, H, W) mirrored left to right.
Tensor flip_horizontal(const Tensor& images);

}  // namespace vit::train
