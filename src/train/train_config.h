// TrainConfig: everything a training run is given (data, model, optimiser, schedule,
// augmentation, output), the part of it saved into every checkpoint as JSON (the fields listed
// in visit_fields; see core/fields.h), its validation, and the default digits recipe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/fields.h"
#include "data/loader.h"
#include "model/vit_config.h"

namespace vit::train {

// What a run reports at each epoch end (TrainConfig::on_epoch): the numbers of its epoch line.
struct EpochReport {
  int64_t epoch = 0, epochs = 0;  // 1-based epoch, of epochs
  double train_loss = 0, train_accuracy = 0, test_loss = 0, test_accuracy = 0, test_top5 = 0;
  double learning_rate = 0, images_per_second = 0, epoch_seconds = 0, elapsed_seconds = 0;
  int64_t step = 0;
  std::string checkpoint;  // last.safetensors, just written
};

struct TrainConfig {
  std::string data_dir = "data/mnist";
  model::ViTConfig model;
  int64_t epochs = 30;  // with resume: 0 keeps the checkpoint's schedule
  // > 0: the schedule is sized to end within this many seconds of training (evaluation included):
  // throughput is measured over the first steps and `steps` fixed from it (and saved).
  double time_budget = 0.0;
  // > 0: the run's length in optimiser steps (fixed by time_budget, or given for an exact rerun);
  // the last epoch may be partial. 0: epochs x steps per epoch.
  int64_t steps = 0;
  // A time-budgeted run re-plans its length at an epoch end when the machine's speed drifted from
  // what was timed: {{0, first total}, {step, new total}, ...} (optim::replanned_cosine_lr); empty
  // while the first plan holds.
  std::vector<std::vector<int64_t>> schedule;
  // > 0: this many training images (a fixed seeded draw, the same for every seed) are held out
  // and evaluated on instead of the test set, which the run then never evaluates: for tuning.
  int64_t val_split = 0;
  int64_t batch_size = 128;
  std::string optimizer = "adamw";  // "adamw" or "sgd"
  double lr = 2e-3;
  double min_lr = 1e-5;
  double weight_decay = 0.05;
  double momentum = 0.9;  // SGD
  double warmup_epochs = 1.0;
  double label_smoothing = 0.1;
  double clip_grad = 1.0;  // 0 disables
  double ema_decay = 0.0;  // > 0 enables weight EMA (evaluated and saved as ema.*)
  data::AugmentConfig augment;
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores
  std::string out_dir = "runs/digits";
  bool resume = false;
  bool overwrite = false;       // replace a run already in out_dir (refused otherwise; not with resume)
  bool skip_nonfinite = false;  // skip steps whose loss is NaN/Inf instead of stopping
  int64_t eval_batch_size = 500;
  int progress = -1;            // -1: a progress bar when stdout is a terminal; 0: plain lines; 1: bar
  bool model_explicit = false;  // the model was chosen by the caller: on resume it must match the checkpoint's
  // The flags the caller set explicitly ("--lr", ...; CLI11's count() > 0). On resume each must be
  // one a resumed run may take (resume.h) or agree with the checkpoint; when empty, only the
  // model is checked (model_explicit).
  std::vector<std::string> given_flags;
  // The model fields set on the command line (ViTConfig keys; "*" for a --preset: all of them).
  // On resume each must equal the checkpoint's.
  std::vector<std::string> given_model_fields;
  // The head's size was set (--num-classes): else a new run's head has one output per class of its
  // training data (a preset's num_classes is a default), and resuming keeps the checkpoint's.
  bool num_classes_given = false;
  int64_t stop_after_epoch = 0;  // > 0: stop after this epoch as if interrupted (resume continues the same schedule)
  // Called at each epoch end, after its checkpoint is saved (the library's and Python's per-epoch
  // callback); returning false stops the run there, resumable as after --stop-after-epoch. An
  // exception it throws ends the run with that exception (the checkpoint is already written).
  std::function<bool(const EpochReport&)> on_epoch;
  int64_t checkpoint_every = 0;                  // > 0: also save last.safetensors every this many steps (mid-epoch)
  int64_t max_pixels = data::kDefaultMaxPixels;  // image folders: refuse larger images (decompression bombs)
  std::string data_residency = "auto";           // image folders: "auto", "memory" or "stream" (data::Residency)
  int64_t loader_threads = 0;                    // threads decoding a streamed folder's images (0: one per core)
  // Under mpirun: seconds a rank waits for the others without progress before it stops the job
  // (a lost rank or host; distributed/comm.h).
  double comm_timeout = 120.0;
  // DeiT's distillation (train/distillation.h): a student with a distillation token trains its
  // second head against this teacher checkpoint's predictions. Empty: no teacher (a distilled
  // student then trains both heads on the labels, through their mean).
  std::string teacher;
  int64_t teacher_heads = 0;          // > 0: the teacher's head count (else its file's, or its width's standard)
  std::string distillation = "hard";  // hard (argmax of the teacher) or soft (KL at distill_tau)
  double distill_alpha = 0.5;         // weight of the distillation head's loss
  double distill_tau = 1.0;           // soft: temperature
  // The Linear and convolution GEMMs' arithmetic (forward, dX, dW): "fp32", or "bf16" -- mixed
  // precision as PyTorch's CPU autocast runs them: bf16 operands, float32 accumulation; the master
  // weights, AdamW state, LayerNorm, softmax, reductions, loss and the checkpoints stay float32
  // (nn::set_matmul_precision). Evaluation runs float32, as `vit eval` does by default.
  std::string precision = "fp32";
  // "flip": at the end of the run, also evaluate with test-time augmentation (each image averaged
  // with its mirror) and print it as a second line beside the plain result (not saved: a report).
  std::string tta = "none";
  // Fine-tuning (train/init_from.h): --init, the file a new run's weights come from (any layout
  // vit loads; the model's shape is the file's), and what was adapted to the data, one line each
  // (printed at the start, recorded in every checkpoint, shown by report.html).
  std::string init;
  std::vector<std::string> init_notes;
  bool new_head = false;        // --new-head: a fresh head even where the file's classes cover the data's
  bool keep_head = false;       // --keep-head: keep a head without class names, its rows matched by index
  double layer_decay = 1.0;     // < 1: block i trains at lr x decay^(depth - i), the embeddings at decay^(depth + 1)
  double head_lr = 0.0;         // > 0: the head's own peak learning rate (on the same schedule)
  std::string freeze = "none";  // "backbone": only the head (and a distilled model's head_dist) trains
  // What belongs to a recipe rather than to the engine:
  std::vector<double> milestones;     // test accuracies whose first crossing is reported (e.g. 0.97, 0.985)
  data::Normalization normalization;  // per-channel mean/std; empty: computed from the training images

  // The fields saved in a checkpoint's "train_config", in its JSON order, all required but the
  // milestones (added later). The model is saved on its own ("model_config"), and so is the
  // normalisation in use; the rest (threads, out_dir, resume, overwrite, progress, model_explicit,
  // given_flags, given_model_fields, stop_after_epoch, checkpoint_every, max_pixels, data_residency,
  // loader_threads, comm_timeout) belongs to one
  // process's run and is not saved.
  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("data_dir", data_dir);
    visit("epochs", epochs);
    visit("batch_size", batch_size);
    visit("optimizer", optimizer);
    visit("lr", lr);
    visit("min_lr", min_lr);
    visit("weight_decay", weight_decay);
    visit("momentum", momentum);
    visit("warmup_epochs", warmup_epochs);
    visit("label_smoothing", label_smoothing);
    visit("clip_grad", clip_grad);
    visit("ema_decay", ema_decay);
    visit("seed", seed);
    visit("skip_nonfinite", skip_nonfinite);
    visit("eval_batch_size", eval_batch_size);
    visit("augment", augment);
    visit("milestones", milestones, Presence::Optional);
    visit("time_budget", time_budget, Presence::Optional);
    visit("steps", steps, Presence::Optional);
    visit("val_split", val_split, Presence::Optional);
    visit("schedule", schedule, Presence::Optional);
    visit("teacher", teacher, Presence::Optional);
    visit("teacher_heads", teacher_heads, Presence::Optional);
    visit("distillation", distillation, Presence::Optional);
    visit("distill_alpha", distill_alpha, Presence::Optional);
    visit("distill_tau", distill_tau, Presence::Optional);
    visit("precision", precision, Presence::Optional);
    visit("init", init, Presence::Optional);
    visit("init_notes", init_notes, Presence::Optional);
    visit("new_head", new_head, Presence::Optional);
    visit("keep_head", keep_head, Presence::Optional);
    visit("layer_decay", layer_decay, Presence::Optional);
    visit("head_lr", head_lr, Presence::Optional);
    visit("freeze", freeze, Presence::Optional);
  }
  std::string to_json() const;
  static TrainConfig from_json(const std::string& json);  // throws on invalid JSON
  // Whether the caller set the option ("--mean") / the model field ("image_size") explicitly.
  bool flag_given(const std::string& flag) const;
  bool model_field_given(const std::string& key) const;
  void validate() const;
};

// The recipe for the bundled digits (vit_digits on data/mnist).
TrainConfig digits_recipe();
// The main job: vit_hybrid_fashion on data/fashion-mnist (Debian's dataset-fashion-mnist) in a
// 10-minute training budget.
TrainConfig fashion_recipe();
// Fine-tuning a model from --init: the generic defaults with a smaller learning rate (1e-4,
// warmup 1 epoch, 10 epochs, batch 64) and no augmentation (the data's own is the user's choice).
TrainConfig finetune_recipe();
// The recipe `vit train --preset NAME` starts from: the digits' or Fashion-MNIST's for their
// presets, otherwise the generic defaults above with the preset's model.
TrainConfig recipe_for(const std::string& preset);

// A duration as `--time-budget` takes it: seconds ("600", "90.5") or numbers with units s, m, h
// ("10m", "1h", "1h30m", "45s"). Throws naming the text when it is none of these or not positive.
double parse_duration(const std::string& text, const std::string& flag);
// "10m", "1h 30m", "45.5s": a duration for messages.
std::string duration_str(double seconds);

}  // namespace vit::train
