// The training loop (see trainer.h), llm.c's TRAINING SECTION: start or resume (run_setup.h),
// fit a time budget (run_budget.h), then for each epoch the steps (train_epoch, train_step: here)
// and the epoch end (epoch_end.h), the ranks of an mpirun job agreeing along the way
// (rank_agreement.h). What the phases share is the Run (run.h).
#include "train/trainer.h"

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "data/epoch_plan.h"
#include "infer/request.h"
#include "train/data_parallel.h"
#include "train/epoch_end.h"
#include "train/health.h"
#include "train/progress.h"
#include "train/rank_agreement.h"
#include "train/run.h"
#include "train/run_budget.h"
#include "train/run_setup.h"

namespace vit::train {
namespace {

// One optimiser step on a batch: forward, backward, finiteness checks, clipping, update, EMA.
// Returns false when the step was skipped (--skip-nonfinite).
bool train_step(Run& run, DataParallel& parallel, const data::Batch& batch, int64_t epoch, Progress& progress,
                EpochResult& e, const StopSignals& signals) {
  const TrainConfig& c = run.config;
  // Dropout masks depend on (seed, step) only, so a resumed run draws the same ones.
  parallel.reseed(c.seed, run.step);
  run.opt->lr = optim::replanned_cosine_lr(run.step, run.warmup_steps, c.schedule, run.total_steps, c.lr, c.min_lr);
  // A hybrid's BatchNorm statistics move in the forward pass: a step skipped below must not leave
  // its batch (a NaN one, say) in them.
  const auto buffers = c.skip_nonfinite ? run.model->named_buffers() : decltype(run.model->named_buffers()){};
  std::vector<Tensor> buffers_before;
  for (const auto& [_, b] : buffers) buffers_before.push_back(b.data().clone());
  DataParallel::StepResult r = parallel.forward_backward(batch, c.label_smoothing);
  // The ranks' losses and hits add up to the global batch's; a stop signal on any rank stops all
  // of them after this step (mpirun passes Ctrl-C on as SIGTERM to every rank).
  std::vector<double> shared = {r.loss, static_cast<double>(r.correct), static_cast<double>(signals.pending())};
  run.comm.sum(shared);
  r.loss = shared[0];
  r.correct = static_cast<int64_t>(shared[1]);
  run.stop_signal = shared[2] == 0 ? 0 : signals.pending() != 0 ? signals.pending() : SIGTERM;
  // The gradients' global norm, in one pass over them, serves both the finiteness check and
  // the clipping. A NaN/Inf loss or gradient: skip the step (--skip-nonfinite) or stop before any
  // update.
  const GradientNorms grads = gradient_norms(run.params);
  if (const std::string what = step_problem(r.loss, run.params, grads); !what.empty()) {
    progress.finish();
    if (c.skip_nonfinite) {
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.data().copy_(buffers_before[i]);
      std::printf("skipping epoch %ld step %ld: %s\n", epoch + 1, run.step, what.c_str());
      ++e.stats.skipped;
      ++run.step;
      return false;
    }
    fail("train", "{} at epoch {} step {}; stopping without saving. The last good checkpoint is {}", what, epoch + 1,
         run.step, run.files.last_good());
  }
  if (c.clip_grad > 0) optim::clip_grad_norm(run.params, c.clip_grad, grads.norm);
  run.opt->step();
  // The update can overflow finite gradients into the weights (a learning rate too high): one
  // pass over the parameters, which the gradients' norm cannot stand for.
  if (const std::string bad = first_nonfinite(run.averaged); !bad.empty()) {  // parameters and buffers
    progress.finish();
    fail("train",
         "parameter '{}' became non-finite in the update of epoch {} step {} (learning rate too high?); "
         "stopping without saving. The last good checkpoint is {}",
         bad, epoch + 1, run.step, run.files.last_good());
  }
  if (run.ema) run.ema->update(run.averaged, run.step);  // with warmup (optimizer.h)
  ++run.step;
  const auto B = batch.global_size;
  e.stats.correct += r.correct;
  e.stats.seen += B;
  e.stats.loss_sum += r.loss * static_cast<double>(B);
  ++e.stats.steps;
  return true;
}

// Trains on every remaining batch of the epoch. On SIGINT/SIGTERM it saves a mid-epoch
// checkpoint and throws Interrupted; --checkpoint-every saves one every N steps.
EpochResult train_epoch(Run& run, DataParallel& parallel, const StopSignals& signals, int64_t epoch) {
  const TrainConfig& c = run.config;
  EpochResult e{.stats = run.first_batch > 0 ? run.carried : EpochStats{}, .start = Clock::now()};
  int64_t batch_index = run.first_batch;
  run.first_batch = 0;
  run.model->train();
  data::EpochPlan planned = data::plan_epoch(run.data.train, c.batch_size, true, true, c.seed, epoch, run.comm.size());
  if (run.data.train.sharded() && run.comm.distributed() && epoch == run.start_epoch) {
    // Each rank says which shards it reads (the first epoch it runs: they are dealt again every epoch).
    const std::vector<uint32_t> mine =
        data::rank_shards(run.data.train, true, c.seed, epoch, run.comm.rank(), run.comm.size());
    std::string names;
    for (const uint32_t s : mine) {
      names += (names.empty() ? "" : " ") + std::filesystem::path(run.data.train.shards[s]).filename().string();
    }
    // (stderr for the other ranks: only the lead's stdout is kept)
    std::fprintf(run.lead() ? stdout : stderr, "shards: rank %d of %d reads %zu of the %zu shards in epoch %ld: %s\n",
                 run.comm.rank(), run.comm.size(), mine.size(), run.data.train.shards.size(), epoch + 1, names.c_str());
    std::fflush(run.lead() ? stdout : stderr);
  }
  auto& batches = planned.batches;
  // A schedule in steps ends inside its last epoch.
  const int64_t left = run.total_steps - epoch * run.steps_per_epoch;
  if (left < static_cast<int64_t>(batches.size())) {
    batches.resize(static_cast<size_t>(std::max<int64_t>(left, 0)));
    if (!planned.bounds.empty()) planned.bounds.resize(batches.size());
  }
  data::BatchLoader loader(run.data.train, std::move(batches),
                           {.augment = c.augment,
                            .norm = run.data.norm,
                            .train = true,
                            .seed = c.seed,
                            .epoch = epoch,
                            .first = static_cast<size_t>(batch_index),
                            .part = run.comm.rank(),
                            .parts = run.comm.size(),
                            .bounds = std::move(planned.bounds)});
  Progress progress(run.bar, fmt::format("epoch {}/{}", epoch + 1, c.epochs), loader.num_batches());
  auto mid_epoch_info = [&] {
    return checkpoint_info(run, epoch, batch_index,
                           e.stats.to_json(std::chrono::duration<double>(Clock::now() - e.start).count()));
  };
  // The loader prepares batches ahead of the steps; the time a step waits for one is the data
  // side's share of the epoch (said at its end).
  auto next = [&] {
    const Clock::time_point asked = Clock::now();
    std::optional<data::Batch> batch = loader.next();
    e.data_wait += std::chrono::duration<double>(Clock::now() - asked).count();
    return batch;
  };
  while (auto batch = next()) {
    const bool stepped = train_step(run, parallel, *batch, epoch, progress, e, signals);
    ++batch_index;
    if (!stepped) continue;
    const double seconds = e.seconds();
    const auto seen = static_cast<double>(e.stats.seen);
    progress.update(batch_index, e.stats.loss_sum / seen, static_cast<double>(e.stats.correct) / seen, seen / seconds,
                    seconds);
    // After the epoch's last batch the epoch-end checkpoint serves both purposes.
    const bool more_batches = batch_index < static_cast<int64_t>(loader.num_batches());
    if (more_batches && run.stop_signal) {
      progress.finish();
      save(run, run.files.last, mid_epoch_info());
      run.comm.barrier(true);  // no rank exits before the lead has saved (mpirun would end the job)
      throw Interrupted(interrupted_message(run, signals), run.stop_signal, run.config.out_dir);
    }
    if (more_batches && c.checkpoint_every > 0 && run.step % c.checkpoint_every == 0) {
      save(run, run.files.last, mid_epoch_info());
    }
  }
  progress.finish();
  e.train_seconds = e.seconds();
  return e;
}

TrainResult train_job(TrainConfig config, distributed::Comm& comm) {
  std::exception_ptr failed;
  std::unique_ptr<Run> started;
  try {
    started = std::make_unique<Run>(start_or_resume(std::move(config)));  // configs, data, model, optimiser, schedule
  } catch (...) {
    failed = std::current_exception();
  }
  if (comm.distributed()) agree_on_start(started.get(), failed, comm);
  if (failed) std::rethrow_exception(failed);
  Run& run = *started;
  if (!run.resumed && run.lead()) run.files.start_fresh();
  plan(run);
  const TrainConfig& c = run.config;
  DataParallel parallel(*run.model, run.threads, comm);
  parallel.set_matmul_precision(infer::parse_precision(c.precision) == infer::Precision::BF16 ? MatmulPrecision::BF16
                                                                                              : MatmulPrecision::F32);
  if (run.teacher) {
    parallel.set_teacher(run.teacher.get(), {c.distillation, c.distill_alpha, c.distill_tau});
    if (run.lead()) {
      std::printf("distillation: %s, alpha %g%s, teacher %s (%s layout, %ld parameters)\n", c.distillation.c_str(),
                  c.distill_alpha, c.distillation == "soft" ? fmt::format(", tau {}", c.distill_tau).c_str() : "",
                  c.teacher.c_str(), run.teacher->loaded().layout.c_str(),
                  run.teacher->loaded().model->num_parameters());
    }
  }
  run.start = Clock::now();
  const StopSignals signals;
  comm.set_watchdog(c.comm_timeout, [&signals] { return signals.pending(); });
  try {
    BudgetSpeed speed{.carried_seconds = run.first_batch > 0 ? run.carried.seconds : 0.0,
                      .carried_steps = run.first_batch > 0 ? run.carried.steps : 0};
    if (c.time_budget > 0 && c.steps == 0) speed.save_seconds = fit_budget(run, parallel);
    if (run.start_epoch >= c.epochs) {
      report_complete(run);
      return run.result;
    }
    for (int64_t epoch = run.start_epoch; epoch < c.epochs; ++epoch) {
      const EpochResult trained = train_epoch(run, parallel, signals, epoch);  // Interrupted: saved mid-epoch
      const auto evaluated_from = Clock::now();
      const EvalResult eval = evaluate_epoch(run, epoch);
      keep_to_budget(run, speed, trained, std::chrono::duration<double>(Clock::now() - evaluated_from).count());
      check_replicas_agree(run, epoch);
      const EpochReport report = end_epoch(run, epoch, trained, eval);  // metrics, checkpoints, report
      const int stop = static_cast<int>(comm.max(run.stop_signal ? run.stop_signal : signals.pending()));
      if (stop != 0 && epoch + 1 < c.epochs) {
        comm.barrier(true);  // the lead has saved
        throw Interrupted(interrupted_message(run, signals), stop, run.config.out_dir);
      }
      // Under mpirun every rank runs the callback; the ranks stop together if any of them asks.
      if (c.on_epoch && comm.max(c.on_epoch(report) ? 0.0 : 1.0) > 0 && epoch + 1 < c.epochs) {
        std::printf("stopping after epoch %ld of %ld as the epoch callback asked; continue with --resume %s\n",
                    epoch + 1, c.epochs, c.out_dir.c_str());
        std::fflush(stdout);
        return run.result;
      }
      if (c.stop_after_epoch > 0 && epoch + 1 >= c.stop_after_epoch && epoch + 1 < c.epochs) {
        std::printf("stopping after epoch %ld of %ld as asked; continue with --resume %s\n", epoch + 1, c.epochs,
                    c.out_dir.c_str());
        return run.result;
      }
    }
  } catch (const distributed::PeerLost& e) {
    throw distributed::PeerLost(
        fmt::format("{}; stopping at step {}. The last good checkpoint is {} (nothing newer was "
                    "written); continue with: vit train --resume {}",
                    e.what(), run.step, run.files.last_good(), c.out_dir));
  }
  print_overlap(parallel, comm);
  if (run.ema && run.best_epoch > 0) {
    run.result.final_raw_accuracy =
        evaluate_epoch(run, std::max<int64_t>(run.result.epochs_run - 1, 0), Tta::None, Weights::Raw).top1;
  }
  if (c.tta != "none" && run.best_epoch > 0) {  // the final weights, as the run evaluated them (EMA or raw)
    run.result.final_tta_accuracy =
        evaluate_epoch(run, std::max<int64_t>(run.result.epochs_run - 1, 0), parse_tta(c.tta)).top1;
  }
  print_summary(run);
  return run.result;
}

}  // namespace

TrainResult train(TrainConfig config) {
  distributed::Comm& comm = distributed::Comm::world();
  // Rank 0 alone prints (errors, on stderr, come from any rank).
  if (comm.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    std::fprintf(stderr, "warning: %s could not silence its output\n", comm.describe(comm.rank()).c_str());
  }
  return train_job(std::move(config), comm);
}

}  // namespace vit::train
