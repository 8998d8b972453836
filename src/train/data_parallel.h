// Data-parallel training steps on one machine. For a small ViT, splitting each operation across
// two cores costs more in synchronisation than it gains (one thread trains the digits model at
// ~1700 img/s, two threads inside each op at ~2500), so with R threads the batch is cut into R
// slices and R replicas -- sharing the master's weight storage -- each run forward and backward
// on one slice with single-threaded kernels. Their gradients are then added into the master's in
// replica order (deterministic for a given R), giving exactly the full-batch mean gradient.
#pragma once

#include <memory>
#include <vector>

#include "data/loader.h"
#include "model/vision_transformer.h"

namespace vit::train {

class DataParallel {
 public:
  // replicas <= 1: every step runs on the master alone (ops use all threads).
  DataParallel(model::VisionTransformer& master, int replicas);
  int replicas() const { return static_cast<int>(replicas_.size()) + 1; }

  // Dropout generators for a step: the master's and one per replica, derived from (seed, step),
  // so a run resumed at any step draws the same masks as an uninterrupted one.
  void reseed(uint64_t seed, int64_t step);

  struct StepResult {
    double loss = 0.0;    // mean over the batch (with label smoothing and mixup)
    int64_t correct = 0;  // top-1 hits against batch.targets
  };
  // Clears gradients, then forward + backward of the batch; the full-batch gradient ends in the
  // master's parameters' .grad. A non-finite loss is returned as is (the caller decides).
  StepResult forward_backward(const data::Batch& batch, double label_smoothing);

 private:
  model::VisionTransformer& master_;
  std::vector<std::unique_ptr<model::VisionTransformer>> replicas_;  // replicas 1..R-1
};

}  // namespace vit::train
