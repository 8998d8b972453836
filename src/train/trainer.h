// Training a VisionTransformer end to end: AdamW (or SGD) with linear warmup + cosine decay,
// label smoothing, global-norm gradient clipping, optional EMA, augmentation on a background
// thread, evaluation after every epoch, and into out_dir: last.safetensors / best.safetensors
// checkpoints, metrics.jsonl (one JSON object per epoch) and a self-contained report.html.
// --resume continues from out_dir's last checkpoint (saved at epoch ends, every
// checkpoint_every steps, and on SIGINT/SIGTERM) and ends with the same weights as an
// uninterrupted run (bit-identical with one thread and a fixed seed), even from mid-epoch; it
// takes only what cannot change the run (resume.h) and refuses data that is not the run's.
// Checkpoints are replaced atomically, so a crash or SIGKILL at any moment leaves the previous
// one readable. NaN/Inf in the loss, a gradient or a weight stops training (or skips the step)
// naming the step and the parameter, and is never saved. One run at a time in a folder (RunLock,
// run_lock.h); a new run refuses a folder holding a run unless config.overwrite.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "train/train_config.h"

namespace vit::train {

struct TrainResult {
  int64_t epochs_run = 0;
  double final_test_accuracy = 0.0, best_test_accuracy = 0.0;
  double seconds = 0.0;
  double final_tta_accuracy = NAN;                    // --tta flip: the final weights with test-time augmentation
  double final_raw_accuracy = NAN;                    // --ema: the final optimiser weights (the EMA's are the result)
  std::vector<std::pair<double, double>> milestones;  // (accuracy threshold, seconds when first reached; < 0 never)
};

// Thrown by train() after SIGINT/SIGTERM once the checkpoint is saved (the CLI exits with 128 +
// the signal: 130 for SIGINT, 143 for SIGTERM).
using ::vit::Interrupted;  // <vit/error.h>: stopped by a signal after saving

TrainResult train(TrainConfig config);

}  // namespace vit::train
