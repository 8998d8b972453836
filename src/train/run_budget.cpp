// --time-budget on a run (see run_budget.h).
#include "train/run_budget.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "data/epoch_plan.h"
#include "io/safetensors.h"
#include "train/budget.h"

namespace vit::train {
namespace fs = std::filesystem;

double fit_budget(Run& run, DataParallel& parallel) {
  TrainConfig& c = run.config;
  const double budget = c.time_budget;
  data::EpochPlan planned = data::plan_epoch(run.data.train, c.batch_size, true, true, c.seed, 0, run.comm.size());
  auto& batches = planned.batches;
  batches.resize(std::min<size_t>(batches.size(), 64));
  if (!planned.bounds.empty()) planned.bounds.resize(batches.size());
  data::BatchLoader loader(run.data.train, batches,
                           {.augment = c.augment,
                            .norm = run.data.norm,
                            .train = true,
                            .seed = c.seed,
                            .epoch = 0,
                            .part = run.comm.rank(),
                            .parts = run.comm.size(),
                            .bounds = planned.bounds});
  run.model->train();
  constexpr int64_t kMinTimed = 5;
  // The first two batches warm caches and the allocator: untimed, unless there are too few.
  const int64_t kUntimed = static_cast<int64_t>(batches.size()) > 2 + kMinTimed ? 2 : 0;
  int64_t n = 0;
  Clock::time_point from = Clock::now();
  double timed = 0;
  while (auto batch = loader.next()) {
    if (n == kUntimed) from = Clock::now();
    parallel.reseed(c.seed, n);
    (void)parallel.forward_backward(*batch, c.label_smoothing);
    ++n;
    timed = std::chrono::duration<double>(Clock::now() - from).count();
    // Ranks stop timing together (each step is a collective): when the slowest is done.
    const bool enough = n - kUntimed >= kMinTimed && timed >= 0.015 * budget;
    if (run.comm.max(enough ? 0.0 : 1.0) == 0.0) break;
  }
  run.model->zero_grad();
  // The optimiser update, clipping and EMA are not timed above: a 3% margin covers them.
  const double step_seconds = run.comm.max(std::max(timed / static_cast<double>(n - kUntimed) * 1.03, 1e-6));
  // One evaluation pass, from a slice of the evaluation set.
  const int64_t slice = std::min<int64_t>(run.data.test.size(), 2 * c.eval_batch_size);
  std::vector<int64_t> first(static_cast<size_t>(slice));
  std::iota(first.begin(), first.end(), int64_t{0});
  const data::Dataset part = data::subset(run.data.test, first, run.data.test.source);
  const auto e0 = Clock::now();
  if (slice > 0) (void)evaluate(*run.model, part, run.data.norm, c.eval_batch_size, eval_shard(run));
  double eval_seconds = std::chrono::duration<double>(Clock::now() - e0).count() *
                        static_cast<double>(run.data.test.size()) / static_cast<double>(std::max<int64_t>(slice, 1));
  // Each epoch end also saves last.safetensors (and best.safetensors when it improves), fsynced:
  // timed on a scratch save beside them, counted twice.
  const std::string scratch = io::temp_path(run.files.last);
  const auto s0 = Clock::now();
  save(run, scratch, checkpoint_info(run, 0, 0, "{}"));
  std::error_code ignored;
  fs::remove(scratch, ignored);
  const double save_seconds = run.comm.max(std::chrono::duration<double>(Clock::now() - s0).count());
  eval_seconds = run.comm.max(eval_seconds) + 2 * save_seconds;
  // The most steps S whose training and epoch ends fit in what is left: S * step + ceil(S / steps
  // per epoch) * (evaluation + saves), less 2% of the budget (budget.h).
  double elapsed = run.elapsed();
  run.comm.broadcast(elapsed);  // the lead's clock
  const int64_t steps = steps_for_budget(budget, elapsed, run.steps_per_epoch, step_seconds, eval_seconds);
  VIT_CHECK(steps >= 1, "train",
            "--time-budget {}: too short for one step and an evaluation (a step takes {:.3f} s, an evaluation and its "
            "saves {:.2f} s, timing took {:.1f} s)",
            duration_str(budget), step_seconds, eval_seconds, elapsed);
  set_steps(run, steps);
  std::printf(
      "time budget %s: a step takes %.3f s (timed over %ld batches), an evaluation and its saves %.2f s -> %ld steps = "
      "%.2f "
      "epochs, fixed (rerun exactly with --steps %ld)\n",
      duration_str(budget).c_str(), step_seconds, n - kUntimed, eval_seconds, steps,
      static_cast<double>(steps) / static_cast<double>(run.steps_per_epoch), steps);
  std::fflush(stdout);
  return save_seconds;
}

void keep_to_budget(Run& run, BudgetSpeed& speed, const EpochResult& trained, double eval_seconds) {
  TrainConfig& c = run.config;
  if (c.time_budget <= 0 || trained.stats.steps == 0) return;
  speed.trained_seconds += trained.train_seconds - speed.carried_seconds;
  speed.trained_steps += trained.stats.steps - speed.carried_steps;
  speed.carried_seconds = 0;
  speed.carried_steps = 0;
  if (speed.trained_steps <= 0) return;
  const int64_t left = run.total_steps - run.step;
  if (left <= 0 || run.step < run.warmup_steps) return;
  // Every rank decides alike: from the slowest rank's speed and the lead's clock.
  const double step_seconds = run.comm.max(speed.trained_seconds / static_cast<double>(speed.trained_steps));
  const double end_seconds = run.comm.max(eval_seconds + 2 * speed.save_seconds);
  double elapsed = run.elapsed();
  run.comm.broadcast(elapsed);
  const int64_t fits = steps_left_within_budget({.budget = c.time_budget,
                                                 .elapsed = elapsed,
                                                 .pending_seconds = 2 * speed.save_seconds,
                                                 .step = run.step,
                                                 .steps_left = left,
                                                 .steps_per_epoch = run.steps_per_epoch,
                                                 .step_seconds = step_seconds,
                                                 .end_seconds = end_seconds});
  if (fits == left) return;
  if (c.schedule.empty()) c.schedule.push_back({0, run.total_steps});
  c.schedule.push_back({run.step, run.step + fits});
  std::printf(
      "the machine runs at %.3f s a step now: re-planned the %ld steps left to %ld, to end within the %s budget "
      "(the learning-rate cosine continues from where it is; the checkpoint records the new plan)\n",
      step_seconds, left, fits, duration_str(c.time_budget).c_str());
  set_steps(run, run.step + fits);
}

}  // namespace vit::train
