// The end of an epoch and of a run (see epoch_end.h).
#include "train/epoch_end.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "train/report.h"

namespace vit::train {
namespace {

// Copies tensors into the model's parameters (same names, same order).
void assign(const optim::NamedParameters& params, const optim::NamedTensors& values) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor dst = params[i].second.data();
    dst.copy_(values[i].second);
  }
}

}  // namespace

EvalResult evaluate_epoch(Run& run, int64_t epoch, Tta tta, Weights weights) {
  EvalResult eval;
  if (run.ema && weights == Weights::AsEvaluated) {
    optim::NamedTensors current;
    for (const auto& [name, p] : run.averaged) current.emplace_back(name, p.data().clone());
    assign(run.averaged, run.ema->averages());
    eval = evaluate(*run.model, run.data.test, run.data.norm, run.config.eval_batch_size, eval_shard(run),
                    infer::Precision::F32, tta);
    assign(run.averaged, current);
  } else {
    eval = evaluate(*run.model, run.data.test, run.data.norm, run.config.eval_batch_size, eval_shard(run),
                    infer::Precision::F32, tta);
  }
  if (!std::isfinite(eval.loss)) {
    fail("train",
         "test loss is {} after epoch {}: the weights are unusable; stopping without saving. The last good "
         "checkpoint is {}",
         number_str(eval.loss), epoch + 1, run.files.last_good());
  }
  return eval;
}

EpochReport end_epoch(Run& run, int64_t epoch, const EpochResult& e, const EvalResult& eval) {
  const TrainConfig& c = run.config;
  const EpochStats& s = e.stats;
  const double epoch_seconds = e.seconds();
  const double elapsed = run.elapsed();
  const double train_loss = s.seen ? s.loss_sum / static_cast<double>(s.seen) : NAN;
  const double train_acc = s.seen ? static_cast<double>(s.correct) / static_cast<double>(s.seen) : NAN;
  const double images_per_s = static_cast<double>(s.seen) / e.train_seconds;
  nlohmann::ordered_json row = {{"epoch", epoch + 1},
                                {"train_loss", train_loss},
                                {"train_acc", train_acc},
                                {"test_loss", eval.loss},
                                {"test_acc", eval.top1},
                                {"test_top5", eval.top5},
                                {"lr", run.opt->lr},
                                {"images_per_s", images_per_s},
                                {"seconds", epoch_seconds},
                                {"elapsed", elapsed},
                                {"skipped_steps", s.skipped},
                                {"step", run.step},
                                {"threads", run.threads},
                                {"ranks", run.comm.size()},
                                {"data_wait_seconds", e.data_wait},
                                {"train_seconds", e.train_seconds}};
  if (run.lead()) append_line(run.files.metrics, row.dump());
  const char* set = c.val_split > 0 ? "val" : "test";
  std::printf("epoch %ld/%ld  train loss %.4f acc %.2f%%  %s loss %.4f acc %.2f%%  %.0f img/s  %.1fs (total %.1fs)\n",
              epoch + 1, c.epochs, train_loss, 100 * train_acc, set, eval.loss, 100 * eval.top1, images_per_s,
              epoch_seconds, elapsed);
  // The data side: how long the steps waited for the loader (decoding a streamed folder's images,
  // augmenting), so a slow disk or decoder shows.
  if (e.train_seconds > 0 && (run.data.train.streamed() || e.data_wait > 0.05 * e.train_seconds)) {
    std::printf("  data: the steps waited %.1f s of %.1f s for the loader (%.1f%%)%s\n", e.data_wait, e.train_seconds,
                100.0 * e.data_wait / e.train_seconds,
                e.data_wait > 0.05 * e.train_seconds ? "; more --loader-threads or a faster disk would help" : "");
  }
  // The two weakest classes by name: where the model still errs.
  if (eval.per_class_accuracy.size() > 2 && !run.data.test.class_names.empty()) {
    std::vector<size_t> order(eval.per_class_accuracy.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    auto acc_of = [&](size_t k) {
      return std::isfinite(eval.per_class_accuracy[k]) ? eval.per_class_accuracy[k] : 2.0;  // no images: last
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return acc_of(a) < acc_of(b); });
    auto name = [&](size_t k) {
      return k < run.data.test.class_names.size() ? run.data.test.class_names[k] : std::to_string(k);
    };
    std::printf("  weakest classes: %s %.1f%%, %s %.1f%%\n", name(order[0]).c_str(), 100 * acc_of(order[0]),
                name(order[1]).c_str(), 100 * acc_of(order[1]));
  }
  for (auto& [t, at] : run.result.milestones) {
    if (at < 0 && eval.top1 >= t) {
      at = elapsed;
      std::printf("reached %.1f%% %s accuracy after %.1f s of training (epoch %ld)\n", 100 * t, set, elapsed,
                  epoch + 1);
    }
  }
  const checkpoint::CheckpointInfo info = checkpoint_info(run, epoch + 1, 0, "{}");
  save(run, run.files.last, info);
  // The best so far, the first epoch's whatever its accuracy (a run that stays at 0% still has one).
  if (eval.top1 > run.result.best_test_accuracy || run.best_epoch == 0) {
    run.result.best_test_accuracy = eval.top1;
    run.best_epoch = epoch + 1;
    save(run, run.files.best, info);
  }
  run.result.epochs_run = epoch + 1;
  run.result.final_test_accuracy = eval.top1;
  run.result.seconds = elapsed;
  const EpochReport numbers{.epoch = epoch + 1,
                            .epochs = c.epochs,
                            .train_loss = train_loss,
                            .train_accuracy = train_acc,
                            .test_loss = eval.loss,
                            .test_accuracy = eval.top1,
                            .test_top5 = eval.top5,
                            .learning_rate = run.opt->lr,
                            .images_per_second = images_per_s,
                            .epoch_seconds = epoch_seconds,
                            .elapsed_seconds = elapsed,
                            .step = run.step,
                            .checkpoint = run.files.last};
  if (!run.lead()) return numbers;
  ReportInputs report;
  report.config = &c;
  report.metrics = read_metrics(run.files.metrics);
  report.eval = &eval;
  report.eval_data = &run.data.test;
  report.total_steps = run.total_steps;
  report.warmup_steps = run.warmup_steps;
  report.steps_per_epoch = run.steps_per_epoch;
  report.benchmark = run.data.benchmark;
  write_report(run.files.report, report);
  std::fflush(stdout);
  return numbers;
}

void report_complete(Run& run) {
  const std::vector<nlohmann::json> rows = read_metrics(run.files.metrics);
  TrainResult& r = run.result;
  r.epochs_run = run.start_epoch;
  r.final_test_accuracy = rows.empty() ? NAN : metric(rows.back(), "test_acc");
  r.seconds = run.elapsed_before;
  std::printf(
      "the run in %s is already complete (%ld of %ld epochs): test accuracy %.2f%% (best %.2f%%) after %.1f s "
      "of training; to train longer, resume with --epochs N (N > %ld)\n",
      run.config.out_dir.c_str(), run.start_epoch, run.config.epochs, 100 * r.final_test_accuracy,
      100 * r.best_test_accuracy, r.seconds, run.start_epoch);
}

void print_summary(const Run& run) {
  const TrainResult& result = run.result;
  const TrainConfig& c = run.config;
  const char* set = c.val_split > 0 ? "validation" : "test";
  std::printf("done: %s accuracy %.2f%% (best %.2f%%) after %.1f s;", set, 100 * result.final_test_accuracy,
              100 * result.best_test_accuracy, result.seconds);
  for (const auto& [t, at] : result.milestones) {
    if (at >= 0)
      std::printf(" %.1f%% at %.1f s;", 100 * t, at);
    else
      std::printf(" %.1f%% not reached;", 100 * t);
  }
  // What is there to show for it: best.safetensors only once an epoch has ended.
  if (run.best_epoch > 0) {
    std::printf(" wrote %s (last.safetensors; best.safetensors: epoch %ld, %.2f%%%s)\n", c.out_dir.c_str(),
                run.best_epoch, 100 * result.best_test_accuracy, run.ema ? ", EMA weights as evaluated" : "");
  } else {
    std::printf(" wrote %s (last.safetensors; no epoch ended, so no best.safetensors)\n", c.out_dir.c_str());
  }
  // The loader's share of the training time over the whole run (every epoch's metrics row).
  double waited = 0, trained = 0;
  for (const nlohmann::json& row : read_metrics(run.files.metrics)) {
    waited += row.value("data_wait_seconds", 0.0);
    trained += row.value("train_seconds", 0.0);
  }
  if (trained > 0 && (run.data.train.streamed() || waited > 0.05 * trained)) {
    std::printf("data: over the run the steps waited %.1f s of %.1f s of training for the loader (%.1f%%)\n", waited,
                trained, 100.0 * waited / trained);
  }
  if (std::isfinite(result.final_raw_accuracy)) {
    std::printf(
        "without EMA (the optimiser's own weights): %s accuracy %.2f%% (the EMA weights above are the run's "
        "result)\n",
        set, 100 * result.final_raw_accuracy);
  }
  if (std::isfinite(result.final_tta_accuracy)) {
    std::printf(
        "with test-time augmentation (%s): %s accuracy %.2f%% (the plain single view above is the run's "
        "result)\n",
        c.tta.c_str(), set, 100 * result.final_tta_accuracy);
  }
  if (c.time_budget > 0) {
    std::printf("time budget %s: used %.1f s (%.1f%%, evaluation included)\n", duration_str(c.time_budget).c_str(),
                result.seconds, 100 * result.seconds / c.time_budget);
  }
  if (run.data.benchmark && c.val_split == 0 && std::isfinite(result.final_test_accuracy)) {
    std::printf("%s benchmark (%s):\n", run.data.benchmark->dataset.c_str(), run.data.benchmark->source.c_str());
    const std::string ours = fmt::format("vit: this run ({}, {})", c.model.name, duration_str(result.seconds));
    for (const PlacedRow& r : place(*run.data.benchmark, ours, result.final_test_accuracy)) {
      std::printf("  %s %5.1f%%  %s\n", r.ours ? "->" : "  ", 100 * r.row.accuracy, r.row.method.c_str());
    }
    std::printf("this run sits %s\n", placement_text(*run.data.benchmark, result.final_test_accuracy).c_str());
  }
}

}  // namespace vit::train
