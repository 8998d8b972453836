// Data-parallel training steps on one machine. For a small ViT, splitting each operation across
// two cores costs more in synchronisation than it gains (one thread trains the digits model at
// ~1700 img/s, two threads inside each op at ~2500), so with R threads the batch is cut into R
// slices and R replicas -- sharing the master's weight storage -- each run forward and backward
// on one slice with single-threaded kernels. Their gradients are then added into the master's in
// replica order (deterministic for a given R), giving exactly the full-batch mean gradient.
//
// Across processes (an MPI job, distributed::Comm), each rank holds its slice of the global batch
// (data::Batch::first/global_size) and splits it again over its threads; one GradientReducer sums
// the gradients over threads and ranks, overlapped with the backward pass. Dropout and drop-path
// masks are drawn per sample, keyed by (seed, step, position in the global batch), so N ranks x R
// threads train the same model as one thread, up to floating-point summation order.
#pragma once

#include <memory>
#include <vector>

#include "data/loader.h"
#include "distributed/comm.h"
#include "model/vision_transformer.h"
#include "train/distillation.h"
#include "train/gradient_reducer.h"

namespace vit::train {

class DataParallel {
 public:
  // replicas <= 1: every step runs on the master alone (ops use all threads). comm: the job's
  // processes (a single process: no communication).
  DataParallel(model::VisionTransformer& master, int replicas, distributed::Comm& comm = distributed::Comm::world());
  int replicas() const { return static_cast<int>(replicas_.size()) + 1; }

  // The dropout key of a step, from (seed, step): a run resumed at any step draws the same masks
  // as an uninterrupted one, and every rank and thread the same as one process would.
  void reseed(uint64_t seed, int64_t step);

  struct StepResult {
    double loss = 0.0;    // this process's share of the global batch's mean loss (label smoothing, mixup)
    int64_t correct = 0;  // top-1 hits against batch.targets (this process's rows)
  };
  // Clears gradients, then forward + backward of the batch (this process's slice of the global
  // batch); the global batch's mean gradient ends in the master's parameters' .grad on every
  // rank. A non-finite loss skips this replica's backward (its gradient counts as zero) and is
  // returned as is (the caller decides, after summing the losses over the ranks).
  StepResult forward_backward(const data::Batch& batch, double label_smoothing);

  // The GEMMs' arithmetic of the master and every replica (nn::set_matmul_precision): BF16 for
  // mixed-precision training.
  void set_matmul_precision(MatmulPrecision precision);

  GradientReducer* reducer() { return reducer_.get(); }
  // DeiT's distillation: every step asks the teacher (kept by the caller, outliving this) for its
  // logits of the batch and trains the master's distillation head on them. nullptr: none.
  void set_teacher(Teacher* teacher, const DistillationSettings& settings) {
    teacher_ = teacher;
    distill_ = settings;
  }

 private:
  // Buffers (a hybrid's BatchNorm statistics): each replica and rank normalises with its own slice's
  // statistics (as PyTorch's DistributedDataParallel without SyncBatchNorm) and moves its own
  // running estimates; after each step they are averaged over the replicas that ran and over the
  // ranks, so every replica and rank holds the same ones (what rank 0 saves).
  void average_buffers(int replicas_run);
  model::VisionTransformer& master_;
  std::vector<std::unique_ptr<model::VisionTransformer>> replicas_;  // replicas 1..R-1
  distributed::Comm& comm_;
  std::unique_ptr<GradientReducer> reducer_;  // when there is more than one replica or rank
  uint64_t key_ = 0;
  Teacher* teacher_ = nullptr;
  DistillationSettings distill_;
};

}  // namespace vit::train
