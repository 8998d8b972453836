// --time-budget on a run (the arithmetic is budget.h's): before the first step, time a few steps,
// an evaluation and a save and fix the number of steps that fit; at each epoch end, re-plan the
// steps left when the machine's speed drifted. Under mpirun every rank decides from the lead's
// clock and the slowest rank's speed.
#pragma once

#include "train/data_parallel.h"
#include "train/run.h"

namespace vit::train {

// The speed a budgeted run measured in this process, for the re-planning at epoch ends.
struct BudgetSpeed {
  double save_seconds = 0.0;  // one checkpoint save, as timed by fit_budget
  // Training time and steps of this process's epochs; the resumed epoch's earlier part (carried,
  // another process's) is left out.
  double trained_seconds = 0.0, carried_seconds = 0.0;
  int64_t trained_steps = 0, carried_steps = 0;
};

// Sizes the schedule to --time-budget: times forward + backward on the first batches of epoch 1
// (without updates, so the run's state is untouched and `--steps N` reruns it exactly) and an
// evaluation pass over part of the evaluation set, then fixes the number of steps whose training
// and per-epoch evaluations fit in what is left of the budget. Returns one save's seconds.
double fit_budget(Run& run, DataParallel& parallel);

// At an epoch end of a budgeted run (before its saves): adds the epoch to `speed` and, when the
// steps left at the speed so far (all of this process's epochs: one epoch's speed jitters too
// much) and with this epoch end's cost would end more than 2% away from the budget, re-plans the
// length so they end at it (the cosine continues from where it is: optim::replanned_cosine_lr).
// A shared machine's speed drifts by up to ~30% within minutes; this keeps the run to its budget.
void keep_to_budget(Run& run, BudgetSpeed& speed, const EpochResult& trained, double eval_seconds);

}  // namespace vit::train
