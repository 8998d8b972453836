// The time budget's arithmetic (see budget.h).
#include "train/budget.h"

#include <algorithm>
#include <cmath>

namespace vit::train {

int64_t epochs_for(int64_t steps, int64_t steps_per_epoch) { return (steps + steps_per_epoch - 1) / steps_per_epoch; }

double seconds_to_train(int64_t step, int64_t steps, int64_t steps_per_epoch, double step_seconds, double end_seconds) {
  const int64_t ends = epochs_for(step + steps, steps_per_epoch) - epochs_for(step, steps_per_epoch);
  return static_cast<double>(steps) * step_seconds + static_cast<double>(ends) * end_seconds;
}

// seconds_to_train grows with the steps, so a binary search finds the most that fit.
int64_t steps_that_fit(double seconds, int64_t steps_per_epoch, int64_t step, double step_seconds, double end_seconds) {
  int64_t fits = 0, over = static_cast<int64_t>(std::min(std::max(seconds, 0.0) / step_seconds, 1e15)) + 1;
  while (over - fits > 1) {
    const int64_t mid = fits + (over - fits) / 2;
    (seconds_to_train(step, mid, steps_per_epoch, step_seconds, end_seconds) <= seconds ? fits : over) = mid;
  }
  return fits;
}

int64_t steps_for_budget(double budget, double elapsed, int64_t steps_per_epoch, double step_seconds,
                         double end_seconds) {
  return steps_that_fit(0.98 * budget - elapsed, steps_per_epoch, 0, step_seconds, end_seconds);
}

int64_t steps_left_within_budget(const BudgetCheck& at) {
  if (!(at.step_seconds > 0)) return at.steps_left;
  const double remaining = at.budget - at.elapsed - at.pending_seconds;
  const double projected =
      seconds_to_train(at.step, at.steps_left, at.steps_per_epoch, at.step_seconds, at.end_seconds);
  // Keep the plan while it ends between 3.5% and 0.5% of the budget early: a run drifting later
  // than that is cut at once (it must not overrun), one more than 3.5% early is lengthened.
  const double early = remaining - projected;
  if (early >= 0.005 * at.budget && early <= 0.035 * at.budget) return at.steps_left;
  return std::max<int64_t>(
      1, steps_that_fit(remaining - 0.01 * at.budget, at.steps_per_epoch, at.step, at.step_seconds, at.end_seconds));
}

}  // namespace vit::train
