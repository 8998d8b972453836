// Training a VisionTransformer end to end: AdamW (or SGD) with linear warmup + cosine decay,
// label smoothing, global-norm gradient clipping, optional EMA, augmentation on a background
// thread, evaluation after every epoch, and into out_dir: last.safetensors / best.safetensors
// checkpoints, metrics.jsonl (one JSON object per epoch) and a self-contained report.html.
// --resume continues from out_dir's last checkpoint (saved at epoch ends, every
// checkpoint_every steps, and on SIGINT/SIGTERM) and ends with the same weights as an
// uninterrupted run (bit-identical with one thread and a fixed seed), even from mid-epoch.
// Checkpoints are replaced atomically, so a crash or SIGKILL at any moment leaves the previous
// one readable. NaN/Inf in the loss, a gradient or a weight stops training (or skips the step)
// naming the step and the parameter, and is never saved.
#pragma once

#include <string>

#include "core/check.h"
#include "data/loader.h"
#include "model/vit_config.h"

namespace vit::train {

struct TrainConfig {
  std::string data_dir = "data/mnist";
  model::ViTConfig model;
  int64_t epochs = 30;  // with resume: 0 keeps the checkpoint's schedule
  int64_t batch_size = 128;
  std::string optimizer = "adamw";  // "adamw" or "sgd"
  double lr = 2e-3;
  double min_lr = 1e-5;
  double weight_decay = 0.05;
  double momentum = 0.9;       // SGD
  double warmup_epochs = 1.0;
  double label_smoothing = 0.1;
  double clip_grad = 1.0;      // <= 0 disables
  double ema_decay = 0.0;      // > 0 enables weight EMA (evaluated and saved as ema.*)
  data::AugmentConfig augment;
  uint64_t seed = 0;
  int threads = 0;             // 0: all cores
  std::string out_dir = "runs/digits";
  bool resume = false;
  bool skip_nonfinite = false;  // skip steps whose loss is NaN/Inf instead of stopping
  int64_t eval_batch_size = 500;
  int progress = -1;            // -1: a progress bar when stdout is a terminal; 0: plain lines; 1: bar
  bool model_explicit = false;  // the model was chosen by the caller: on resume it must match the checkpoint's
  int64_t stop_after_epoch = 0;  // > 0: stop after this epoch as if interrupted (resume continues the same schedule)
  int64_t checkpoint_every = 0;  // > 0: also save last.safetensors every this many steps (mid-epoch)
  int64_t max_pixels = data::kDefaultMaxPixels;  // image folders: refuse larger images (decompression bombs)

  std::string to_json() const;
  static TrainConfig from_json(const std::string& json);  // throws on invalid JSON
  void validate() const;
};

struct TrainResult {
  int64_t epochs_run = 0;
  double final_test_accuracy = 0.0, best_test_accuracy = 0.0;
  double seconds = 0.0;
  std::vector<std::pair<double, double>> milestones;  // (accuracy threshold, seconds when first reached; < 0 never)
};

// The default recipe for the bundled digits (the README's main job).
TrainConfig digits_recipe();

// Thrown by train() after SIGINT/SIGTERM once the checkpoint is saved (the CLI exits with 130).
class Interrupted : public Error {
 public:
  using Error::Error;
};

TrainResult train(TrainConfig config);

}  // namespace vit::train
