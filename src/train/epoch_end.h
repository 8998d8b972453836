// The end of an epoch (trainer.cpp's loop): evaluation (with the EMA weights when enabled), the
// epoch's line and metrics.jsonl row, milestones, last/best checkpoints and report.html; and the
// run's last words: the numbers of a run resumed after it was complete, and the summary.
#pragma once

#include "train/evaluate.h"
#include "train/run.h"

namespace vit::train {

// Which weights an evaluation reads: those the run evaluates (the EMA averages when enabled), or
// the optimiser's own (for the end-of-run line beside the EMA result).
enum class Weights { AsEvaluated, Raw };
// On the evaluation set; a non-finite loss stops the run.
EvalResult evaluate_epoch(Run& run, int64_t epoch, Tta tta = Tta::None, Weights weights = Weights::AsEvaluated);
// Records the epoch (metrics, milestones, checkpoints, report) and returns its numbers
// (TrainConfig::on_epoch).
EpochReport end_epoch(Run& run, int64_t epoch, const EpochResult& e, const EvalResult& eval);
// Resuming a run that has already run all its epochs: its real numbers, from metrics.jsonl.
void report_complete(Run& run);
// "done: test accuracy ..." with the milestones, the budget used and the benchmark placement.
void print_summary(const Run& run);

}  // namespace vit::train
