// Evaluation of a classifier on a dataset: mean cross-entropy, top-1 / top-5 accuracy,
// per-class accuracy, the confusion matrix, and which images were misclassified.
#pragma once

#include <functional>
#include <vector>

#include "data/loader.h"
#include "infer/request.h"
#include "model/vision_transformer.h"

namespace vit::train {

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
EvalResult evaluate(model::VisionTransformer& model, const data::Dataset& data, const data::Normalization& norm,
                    int64_t batch_size = 500, const EvalShard& shard = {},
                    infer::Precision precision = infer::Precision::F32);

}  // namespace vit::train
