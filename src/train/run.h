// What the training phases share (trainer.cpp's internal header): the Run -- configuration,
// run folder, data, model and optimiser, the position in the schedule -- and the helpers every
// phase uses on it: checkpoint metadata and saves, the interrupted message, the evaluation's
// share of the ranks. The phases themselves: run_setup.h (start or resume, plan), trainer.cpp
// (the step and the epoch), run_budget.h (--time-budget), epoch_end.h (evaluation, metrics,
// checkpoints, report), rank_agreement.h (what the ranks of an mpirun job must agree on).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "distributed/comm.h"
#include "infer/preprocess.h"
#include "model/vision_transformer.h"
#include "optim/optimizer.h"
#include "train/benchmark_table.h"
#include "train/distillation.h"
#include "train/evaluate.h"
#include "train/run_files.h"
#include "train/run_lock.h"
#include "train/stop_signals.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace vit::train {

using Clock = std::chrono::steady_clock;

// Running statistics of one epoch (saved in mid-epoch checkpoints, so a resumed epoch reports
// the same numbers as an uninterrupted one).
struct EpochStats {
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0, steps = 0, skipped = 0;
  double seconds = 0.0;  // training time spent on this epoch before the current process

  template <class Visitor>
  void visit_fields(Visitor& visit) {
    visit("loss_sum", loss_sum);
    visit("correct", correct);
    visit("seen", seen);
    visit("steps", steps);
    visit("skipped", skipped);
    visit("seconds", seconds);
  }
  std::string to_json(double more_seconds) const;
  static EpochStats from_json(const std::string& text, const std::string& path);
};

// One epoch's training, as train_epoch hands it to the epoch end.
struct EpochResult {
  EpochStats stats;
  Clock::time_point start;     // of this process's part of the epoch
  double train_seconds = 0.0;  // the epoch's training time (without evaluation)
  double data_wait = 0.0;      // of it, seconds the steps waited for the loader's next batch
  double seconds() const { return stats.seconds + std::chrono::duration<double>(Clock::now() - start).count(); }
};

// The data a run trains and evaluates on.
struct RunData {
  data::Dataset train, test;  // test: the held-out validation images with --val-split
  data::Normalization norm;
  std::string fingerprint;                  // saved in every checkpoint (resume.h)
  std::optional<BenchmarkTable> benchmark;  // a published table this data has (Fashion-MNIST's)
};

// Everything a run holds between its phases.
struct Run {
  explicit Run(const TrainConfig& c) : config(c), files(c.out_dir) {}
  RunLock lock;  // first: released last, after everything else the run holds
  TrainConfig config;
  RunFiles files;
  // The job's processes (one without mpirun). Rank 0 leads: it alone prints, holds the folder's
  // lock and writes checkpoints, metrics.jsonl and report.html.
  distributed::Comm& comm = distributed::Comm::world();
  bool lead() const { return comm.rank() == 0; }
  int threads = 1;
  bool bar = false;      // a redrawn progress bar (terminal) instead of plain lines
  bool resumed = false;  // from the folder's last checkpoint
  RunData data;
  // A fine-tuning run's evaluation transform: the --init model's (its resize, crop and filter at the
  // run's image size), recorded in every checkpoint with the run's normalisation and used on an
  // image folder's test split (as vit eval and vit predict shape photos); unset: squashed to the size.
  std::optional<infer::Preprocess> eval_transform;
  std::unique_ptr<model::VisionTransformer> model;
  optim::NamedParameters params;
  optim::NamedParameters
      averaged;  // what the EMA averages: parameters and buffers (BatchNorm statistics), state-dict order
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::ModelEma> ema;
  std::unique_ptr<Teacher> teacher;  // with --teacher (DeiT's distillation)
  // Where training continues: the epoch, the optimiser step, and for a mid-epoch checkpoint the
  // batches of that epoch already trained on with their statistics.
  int64_t start_epoch = 0, step = 0, first_batch = 0;
  EpochStats carried;
  // The learning-rate schedule's length (plan; a time budget re-plans it: set_steps).
  int64_t steps_per_epoch = 0, total_steps = 0, warmup_steps = 0;
  int stop_signal = 0;          // a stop signal every rank has agreed on (train_step)
  double elapsed_before = 0.0;  // training seconds of earlier processes (resume)
  Clock::time_point start;      // of this process's training
  TrainResult result;
  int64_t best_epoch = 0;  // the epoch best.safetensors holds (0: none written)

  double elapsed() const { return elapsed_before + std::chrono::duration<double>(Clock::now() - start).count(); }
};

// A schedule of `steps` optimiser steps: as many epochs as they start.
void set_steps(Run& run, int64_t steps);
// The checkpoint's metadata at a position (epoch, batch) of the run.
checkpoint::CheckpointInfo checkpoint_info(const Run& run, int64_t epoch, int64_t batch, std::string epoch_stats_json);
// Every save goes through here (rank 0 writes): a failed write (disk full, ...) leaves the
// previous file intact, and the message says so only after checking it.
void save(const Run& run, const std::string& path, const checkpoint::CheckpointInfo& info);
// "interrupted by SIGTERM at step N: saved ..." (each door adds how to continue: run_dir()).
std::string interrupted_message(const Run& run, const StopSignals& signals);
// Evaluation shared among the ranks (evaluate.h).
EvalShard eval_shard(Run& run);

}  // namespace vit::train
