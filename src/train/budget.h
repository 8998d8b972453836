// The time budget's arithmetic (--time-budget), apart from any run so it can be tested alone:
// how long a number of steps takes with the epoch ends (evaluation and saves) that fall among
// them, the most steps that fit in some seconds, and the re-planning a budgeted run does at an
// epoch end when the machine's speed drifted. The run's side (timing, the ranks' agreement,
// printing) is run_budget.h's.
#pragma once

#include <cstdint>

namespace vit::train {

// Epochs that `steps` steps start (the last may be partial).
int64_t epochs_for(int64_t steps, int64_t steps_per_epoch);

// Seconds to train `steps` more steps from `step` (a position in epochs of steps_per_epoch),
// with the epoch ends (evaluation and saves, end_seconds each) that fall among them.
double seconds_to_train(int64_t step, int64_t steps, int64_t steps_per_epoch, double step_seconds, double end_seconds);

// The most steps that train from `step` within `seconds` (0 when none does).
int64_t steps_that_fit(double seconds, int64_t steps_per_epoch, int64_t step, double step_seconds, double end_seconds);

// A run's length for its budget, fixed before the first step: the most steps whose training and
// epoch ends fit in what `elapsed` seconds (of timing) left; 2% of the budget is kept for the
// report and the noise of a shared machine.
int64_t steps_for_budget(double budget, double elapsed, int64_t steps_per_epoch, double step_seconds,
                         double end_seconds);

// Where a budgeted run stands at an epoch end, with the speed it measured.
struct BudgetCheck {
  double budget = 0.0;           // --time-budget, seconds
  double elapsed = 0.0;          // training seconds so far
  double pending_seconds = 0.0;  // this epoch end's saves, still to come
  int64_t step = 0;              // optimiser steps done
  int64_t steps_left = 0;        // of the current plan
  int64_t steps_per_epoch = 1;
  double step_seconds = 0.0;  // one step, as measured
  double end_seconds = 0.0;   // one epoch end (evaluation and saves), as measured
};
// The steps left re-planned to end at the budget: `steps_left` unchanged while, at this speed,
// they end between 3.5% and 0.5% of the budget early (the first plan ends 2% early), or when no
// speed was measured; else the most that fit in what is left less 1% of the budget, and at least 1.
// Lateness is corrected sooner than earliness: a budget is a limit.
int64_t steps_left_within_budget(const BudgetCheck& at);

}  // namespace vit::train
