// The time budget's arithmetic (train/budget.h) without a run: epoch ends counted among the
// steps, the most steps that fit (and that one more would not), the length fixed before the
// first step, and the re-planning at an epoch end (kept within 2%, shortened or lengthened to the
// budget less 1%, never below one step, untouched without a measured speed).
#include "train/budget.h"

#include <gtest/gtest.h>

namespace vit::train {
namespace {

TEST(Budget, EpochsForCountsThePartialLastEpoch) {
  EXPECT_EQ(epochs_for(0, 4), 0);
  EXPECT_EQ(epochs_for(1, 4), 1);
  EXPECT_EQ(epochs_for(4, 4), 1);
  EXPECT_EQ(epochs_for(5, 4), 2);
  EXPECT_EQ(epochs_for(12, 4), 3);
}

TEST(Budget, SecondsToTrainCountTheEpochEndsAmongTheSteps) {
  // 10 steps from 0 in epochs of 4: 10 s of steps and 3 epoch ends (after 4, 8 and 10).
  EXPECT_DOUBLE_EQ(seconds_to_train(0, 10, 4, 1.0, 5.0), 25.0);
  // An epoch's end is counted with the step that starts it: steps 3 and 4 start epoch 2.
  EXPECT_DOUBLE_EQ(seconds_to_train(3, 2, 4, 1.0, 5.0), 7.0);
  EXPECT_DOUBLE_EQ(seconds_to_train(8, 8, 4, 1.0, 5.0), 18.0);
  // From an epoch boundary, one step starts the next epoch: its end counts.
  EXPECT_DOUBLE_EQ(seconds_to_train(4, 1, 4, 0.5, 3.0), 3.5);
  EXPECT_DOUBLE_EQ(seconds_to_train(4, 0, 4, 0.5, 3.0), 0.0);
}

TEST(Budget, StepsThatFitAreTheMostThatDo) {
  EXPECT_EQ(steps_that_fit(25.0, 4, 0, 1.0, 5.0), 10);  // exactly 25 s
  EXPECT_EQ(steps_that_fit(24.9, 4, 0, 1.0, 5.0), 9);
  EXPECT_EQ(steps_that_fit(5.9, 4, 0, 1.0, 5.0), 0);  // one step and its epoch end take 6 s
  EXPECT_EQ(steps_that_fit(6.0, 4, 0, 1.0, 5.0), 1);
  EXPECT_EQ(steps_that_fit(-3.0, 4, 0, 1.0, 5.0), 0);
  // Against seconds_to_train on many cases: S fits, S + 1 does not.
  for (int64_t spe : {1, 3, 7, 50}) {
    for (int64_t step : {0, 1, 6, 49}) {
      for (double seconds : {0.5, 3.0, 17.25, 400.0}) {
        const int64_t s = steps_that_fit(seconds, spe, step, 0.25, 1.5);
        EXPECT_LE(seconds_to_train(step, s, spe, 0.25, 1.5), seconds) << spe << " " << step << " " << seconds;
        EXPECT_GT(seconds_to_train(step, s + 1, spe, 0.25, 1.5), seconds) << spe << " " << step << " " << seconds;
      }
    }
  }
}

TEST(Budget, StepsForBudgetKeepTwoPercentAndCountTheTimingSpent) {
  // 100 s budget less 2%, 8 s spent timing: 90 s for steps of 1 s and epoch ends of 5 s in
  // epochs of 10 steps. S = 60: 60 + 6 * 5 = 90 <= 90; S = 61: 61 + 7 * 5 = 96 > 90.
  EXPECT_EQ(steps_for_budget(100.0, 8.0, 10, 1.0, 5.0), 60);
  EXPECT_EQ(steps_for_budget(100.0, 98.0, 10, 1.0, 5.0), 0);  // nothing left
  // Free epoch ends: 9.8 s of steps of 2^-10 s, 10035.2 of them.
  EXPECT_EQ(steps_for_budget(10.0, 0.0, 10, 0.0009765625, 0.0), 10035);
}

BudgetCheck at_epoch_end() {
  // 1000 s budget, 400 s spent at step 200 of 500, epochs of 100 steps: 300 steps and 3 epoch
  // ends left, 300 * 1.5 + 3 * 10 = 480 s projected against 1000 - 400 - 20 = 580 s remaining.
  return {.budget = 1000.0,
          .elapsed = 400.0,
          .pending_seconds = 20.0,
          .step = 200,
          .steps_left = 300,
          .steps_per_epoch = 100,
          .step_seconds = 1.5,
          .end_seconds = 10.0};
}

TEST(Budget, ReplanningLengthensAFastRunToTheBudgetLessOnePercent) {
  // 100 s early: more than 2% of the budget. 570 s (580 less 1% of 1000) for S steps:
  // S = 360: 540 + 4 * 10 = 580 > 570; S = 353: 529.5 + 4 * 10 = 569.5 <= 570; S = 354: 571 > 570.
  EXPECT_EQ(steps_left_within_budget(at_epoch_end()), 353);
}

TEST(Budget, ReplanningShortensASlowRun) {
  BudgetCheck at = at_epoch_end();
  at.step_seconds = 2.5;  // 300 * 2.5 + 30 = 780 s projected against 580
  // 570 s: S = 216: 540 + 3 * 10 = 570 <= 570; S = 217: 542.5 + 3 * 10 = 572.5 > 570.
  EXPECT_EQ(steps_left_within_budget(at), 216);
}

TEST(Budget, ReplanningKeepsAPlanEndingBetweenThreeAndAHalfAndAHalfPercentEarly) {
  BudgetCheck at = at_epoch_end();  // 580 s remaining: the plan stands for 545..575 s projected
  at.step_seconds = 1.8;            // 540 + 30 = 570 s: 10 s early
  EXPECT_EQ(steps_left_within_budget(at), 300);
  at.step_seconds = 1.72;  // 516 + 30 = 546 s: 34 s early
  EXPECT_EQ(steps_left_within_budget(at), 300);
  at.step_seconds = 1.65;  // 495 + 30 = 525 s: 55 s early, lengthened
  EXPECT_GT(steps_left_within_budget(at), 300);
}

TEST(Budget, ReplanningCutsARunThatWouldEndLessThanHalfAPercentEarly) {
  BudgetCheck at = at_epoch_end();
  at.step_seconds = 1.84;  // 552 + 30 = 582 s: 2 s late (the old 2% window let a run end 20 s late)
  // 570 s: S = 293: 539.12 + 3 * 10 = 569.12 <= 570; S = 294: 540.96 + 30 = 570.96 > 570.
  EXPECT_EQ(steps_left_within_budget(at), 293);
  at.step_seconds = 1.83;  // 549 + 30 = 579 s: 1 s early, inside the last half percent: cut too
  EXPECT_LT(steps_left_within_budget(at), 300);
}

TEST(Budget, ReplanningKeepsAtLeastOneStepAndNeedsASpeed) {
  BudgetCheck at = at_epoch_end();
  at.elapsed = 995.0;  // nothing left: still one step
  EXPECT_EQ(steps_left_within_budget(at), 1);
  at = at_epoch_end();
  at.step_seconds = 0.0;  // no speed measured: the plan stands
  EXPECT_EQ(steps_left_within_budget(at), 300);
}

}  // namespace
}  // namespace vit::train
