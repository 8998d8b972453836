// The training loop (see trainer.h).
#include "train/trainer.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/fields.h"
#include "dist/comm.h"
#include "infer/checkpoint.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "kernels/gemm.h"
#include "optim/optimizer.h"
#include "train/benchmark_table.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/health.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/resume.h"
#include "train/run_files.h"
#include "train/run_lock.h"
#include "train/stop_signals.h"
#include "train/utf8.h"

namespace vit::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

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
  std::string to_json(double more_seconds) const {
    EpochStats s = *this;
    s.seconds += more_seconds;
    return fields_to_json<nlohmann::json>(s).dump();
  }
  static EpochStats from_json(const std::string& text, const std::string& path) {
    EpochStats s;
    try {
      fields_from_json(nlohmann::json::parse(text), s);
    } catch (const nlohmann::json::exception& e) {
      fail("train", "{}: corrupt epoch statistics in the checkpoint ({})", path, e.what());
    }
    return s;
  }
};

// Everything a run holds between its phases.
struct Run {
  explicit Run(const TrainConfig& c) : config(c), files(c.out_dir) {}
  RunLock lock;  // first: released last, after everything else the run holds
  TrainConfig config;
  RunFiles files;
  // The job's processes (one without mpirun). Rank 0 leads: it alone prints, holds the folder's
  // lock and writes checkpoints, metrics.jsonl and report.html.
  dist::Comm& comm = dist::Comm::world();
  bool lead() const { return comm.rank() == 0; }
  int stop_signal = 0;  // a stop signal every rank has agreed on (train_step)
  int threads = 1;
  bool bar = false;  // a redrawn progress bar (terminal) instead of plain lines
  std::optional<infer::LoadedCheckpoint> resumed;
  data::Dataset train_data, test_data;
  data::Normalization norm;
  std::string data_fingerprint;             // saved in every checkpoint (resume.h)
  std::optional<BenchmarkTable> benchmark;  // a published table this data has (Fashion-MNIST's)
  std::unique_ptr<model::VisionTransformer> model;
  optim::NamedParameters params;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::ModelEma> ema;
  std::unique_ptr<Teacher> teacher;  // with --teacher (DeiT's distillation)
  EpochReport last_report;           // the last epoch's numbers (TrainConfig::on_epoch)
  // Where training continues: the epoch, the optimiser step, and for a mid-epoch checkpoint the
  // batches of that epoch already trained on with their statistics.
  int64_t start_epoch = 0, step = 0, first_batch = 0;
  EpochStats carried;
  int64_t steps_per_epoch = 0, total_steps = 0, warmup_steps = 0;
  double elapsed_before = 0.0;  // training seconds of earlier processes (resume)
  double save_seconds = 0.0;    // one checkpoint save, as timed by fit_budget (time budget only)
  // Training time and steps of this process's epochs (the time budget's speed estimate); the
  // resumed epoch's earlier part (carried) is another process's and is left out.
  double trained_seconds = 0.0, carried_seconds = 0.0;
  int64_t trained_steps = 0, carried_steps = 0;
  Clock::time_point start;
  TrainResult result;

  double elapsed() const { return elapsed_before + std::chrono::duration<double>(Clock::now() - start).count(); }
};

// The checkpoint's metadata at a position (epoch, batch) of the run (see the checkpoints section).
infer::CheckpointInfo checkpoint_info(const Run& run, int64_t epoch, int64_t batch, std::string epoch_stats_json);

// Copies tensors into the model's parameters (same names, same order).
void assign(const optim::NamedParameters& params, const optim::NamedTensors& values) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor dst = params[i].second.data();
    dst.copy_(values[i].second);
  }
}

// ---- start or resume ----

// --val-split N: N training images, drawn with a fixed seed (the same for every --seed, so runs
// compare on one validation set), become the evaluation set; the test set is set aside unread.
void hold_out(Run& run) {
  const int64_t n = run.config.val_split, size = run.train_data.size();
  VIT_CHECK(n < size, "train", "--val-split {}: the training set {} has only {} images (some must be left to train on)",
            n, run.train_data.source, size);
  std::vector<int64_t> order = data::epoch_batches(size, size, true, false, 0x7a11da7e, 0).front();
  std::sort(order.end() - n, order.end());  // the validation images, in dataset order
  std::sort(order.begin(), order.end() - n);
  const std::vector<int64_t> train(order.begin(), order.end() - n), val(order.end() - n, order.end());
  const data::Dataset all = std::move(run.train_data);
  run.train_data = data::subset(all, train, fmt::format("{} ({} images left to train on)", all.source, size - n));
  run.test_data = data::subset(all, val, fmt::format("{} ({} held-out validation images)", all.source, n));
  std::printf("validation: %ld of the %ld training images held out (--val-split); the test set is not used\n", n, size);
}

void load_data(Run& run) {
  const TrainConfig& c = run.config;
  const model::ViTConfig& mc = c.model;
  run.train_data = data::load_dataset(c.data_dir, data::Split::Train, mc.in_channels, mc.image_size, c.max_pixels);
  run.test_data = data::load_dataset(c.data_dir, data::Split::Test, mc.in_channels, mc.image_size, c.max_pixels);
  // Class names (folder names, classes.txt lines) are any bytes, but checkpoints and report.html
  // record them as UTF-8 text: bytes that are not are recorded as "\xHH" (they are labels only,
  // never used to find files again).
  std::string escaped;
  for (data::Dataset* d : {&run.train_data, &run.test_data}) {
    for (std::string& name : d->class_names) {
      if (valid_utf8(name)) continue;
      name = escape_invalid_utf8(name);
      if (d == &run.train_data) escaped += (escaped.empty() ? "" : ", ") + name;
    }
  }
  if (!escaped.empty())
    std::printf("class names that are not valid UTF-8 are recorded with \\x escapes: %s\n", escaped.c_str());
  // Labels by class name, not by position in each split's own list: the names the model was
  // trained with are the truth (the checkpoint's when resuming, else the training split's).
  const bool by_checkpoint = run.resumed && !run.resumed->info.class_names.empty();
  const std::string whose =
      by_checkpoint ? "the checkpoint " + run.files.last : "the training split (" + run.train_data.source + ")";
  const std::vector<std::string> known = by_checkpoint ? run.resumed->info.class_names : run.train_data.class_names;
  for (data::Dataset* d : {&run.train_data, &run.test_data}) {
    const std::vector<std::string> missing = data::map_classes(*d, known, whose);
    if (!missing.empty()) fmt::print(stderr, "note: {} has no images of: {}\n", d->source, fmt::join(missing, ", "));
  }
  // A resumed run continues on the data it was trained on: refused otherwise, moved is fine.
  run.data_fingerprint = dataset_fingerprint(run.train_data, run.test_data);
  run.benchmark = known_benchmark(run.train_data.class_names, run.train_data.size(), run.test_data.size());
  if (run.resumed) {
    const std::string run_data_dir = TrainConfig::from_json(run.resumed->info.train_config_json).data_dir;
    if (check_same_data(run.resumed->info, run_data_dir, c.data_dir, run.train_data, run.data_fingerprint)) {
      std::printf("data: %s (the run's data, moved from %s)\n", c.data_dir.c_str(), run_data_dir.c_str());
    }
  }
  if (c.val_split > 0) hold_out(run);
  for (const data::Dataset* d : {&run.train_data, &run.test_data}) {
    VIT_CHECK(d->channels == mc.in_channels && d->height == mc.image_size && d->width == mc.image_size, "train",
              "{}: images are {}x{}x{} but the model expects {}x{}x{}", d->source, d->channels, d->height, d->width,
              mc.in_channels, mc.image_size, mc.image_size);
    VIT_CHECK(d->num_classes() <= mc.num_classes, "train", "{}: {} classes but the model has {} outputs", d->source,
              d->num_classes(), mc.num_classes);
  }
  // The normalisation: the checkpoint's when resuming, else the recipe's, else the data's own.
  if (run.resumed)
    run.norm = run.resumed->info.normalization;
  else if (!c.normalization.mean.empty())
    run.norm = c.normalization;
  else
    run.norm = data::compute_normalization(run.train_data);
}

// The model, optimiser and EMA, restored from the checkpoint when resuming; metrics.jsonl kept
// up to the checkpoint's epoch (or started empty).
void build_model(Run& run) {
  const TrainConfig& c = run.config;
  run.model = std::make_unique<model::VisionTransformer>(c.model, std::make_shared<Generator>(c.seed));
  run.params = run.model->named_parameters();
  if (c.optimizer == "adamw") {
    run.opt = std::make_unique<optim::AdamW>(run.params, c.lr, c.weight_decay);
  } else {
    run.opt = std::make_unique<optim::SGD>(run.params, c.lr, c.momentum, c.weight_decay);
  }
  if (c.ema_decay > 0) run.ema = std::make_unique<optim::ModelEma>(run.params, c.ema_decay);
  if (!run.resumed) return;  // the folder is made fresh once every rank has agreed (train_job)
  const infer::LoadedCheckpoint& r = *run.resumed;
  run.model->load_state_dict(r.weights);
  run.opt->load_state(r.optimizer);
  if (run.ema) {
    VIT_CHECK(r.ema.size() == run.params.size(), "train", "{}: EMA weights missing from the checkpoint",
              run.files.last);
    for (size_t i = 0; i < run.params.size(); ++i) run.ema->averages()[i].second.copy_(r.ema[i].second);
  }
  run.start_epoch = r.info.epoch;
  run.step = r.info.step;
  run.first_batch = r.info.batch;
  if (run.first_batch > 0) {
    run.carried = EpochStats::from_json(r.info.epoch_stats_json, run.files.last);
    run.carried_seconds = run.carried.seconds;
    run.carried_steps = run.carried.steps;
  }
  run.elapsed_before = r.info.elapsed_seconds;
  if (run.lead()) truncate_metrics(run.files.metrics, run.start_epoch);
}

// "2 threads", or "4 ranks x 2 threads (batch 32 per rank)" under mpirun.
std::string workers_str(const Run& run) {
  if (!run.comm.distributed()) return fmt::format("{} threads", run.threads);
  return fmt::format("{} ranks x {} threads, ~{} images per rank", run.comm.size(), run.threads,
                     run.config.batch_size / run.comm.size());
}

// Epochs that `steps` steps start (the last may be partial).
int64_t epochs_for(int64_t steps, int64_t steps_per_epoch) { return (steps + steps_per_epoch - 1) / steps_per_epoch; }

// A schedule of `steps` optimiser steps: as many epochs as they start.
void set_steps(Run& run, int64_t steps) {
  run.config.steps = steps;
  run.config.epochs = epochs_for(steps, run.steps_per_epoch);
  run.total_steps = steps;
}

// The learning-rate schedule's length in steps, and what the run is about to do.
void plan(Run& run) {
  TrainConfig& c = run.config;
  run.steps_per_epoch =
      static_cast<int64_t>(data::epoch_batches(run.train_data.size(), c.batch_size, true, true, c.seed, 0).size());
  if (c.steps > 0) set_steps(run, c.steps);
  run.total_steps = c.steps > 0 ? c.steps : run.steps_per_epoch * c.epochs;
  run.warmup_steps = static_cast<int64_t>(std::llround(c.warmup_epochs * static_cast<double>(run.steps_per_epoch)));
  const model::ComputeCost cost = model::macs_per_image(c.model);
  std::printf("model %s: %ld parameters, %.2f MMACs per image; %ld training / %ld %s images from %s\n",
              c.model.name.c_str(), run.model->num_parameters(), static_cast<double>(cost.total()) / 1e6,
              run.train_data.size(), run.test_data.size(), c.val_split > 0 ? "validation" : "test", c.data_dir.c_str());
  if (c.steps > 0) {
    std::printf("training %ld steps = %.2f epochs of %ld steps (batch %ld, %s lr %g, %s) -> %s\n", c.steps,
                static_cast<double>(c.steps) / static_cast<double>(run.steps_per_epoch), run.steps_per_epoch,
                c.batch_size, c.optimizer.c_str(), c.lr, workers_str(run).c_str(), c.out_dir.c_str());
  } else if (c.time_budget <= 0) {
    std::printf("training %ld epochs x %ld steps (batch %ld, %s lr %g, %s) -> %s\n", c.epochs, run.steps_per_epoch,
                c.batch_size, c.optimizer.c_str(), c.lr, workers_str(run).c_str(), c.out_dir.c_str());
  }
  if (run.resumed) std::printf("resumed from %s at epoch %ld\n", run.files.last.c_str(), run.start_epoch);
  std::fflush(stdout);
  // Milestones (and the best accuracy) already passed before a resume.
  for (double t : c.milestones) run.result.milestones.emplace_back(t, -1.0);
  for (const auto& row : read_metrics(run.files.metrics)) {
    const double acc = metric(row, "test_acc");
    if (acc > run.result.best_test_accuracy) run.result.best_test_accuracy = acc;
    for (auto& [t, at] : run.result.milestones) {
      if (at < 0 && acc >= t) at = metric(row, "elapsed");
    }
  }
}

Run start_or_resume(TrainConfig config) {
  if (!config.resume) config.validate();
  if (config.threads > 0) {
    omp_set_num_threads(config.threads);
    kernels::set_blas_threads(config.threads);
  }
  Run run(config);
  run.threads = omp_get_max_threads();
  VIT_CHECK(!fs::exists(run.files.dir) || fs::is_directory(run.files.dir), "train",
            "{} {}: exists and is not a directory{}", config.resume ? "--resume" : "--out", config.out_dir,
            config.resume ? " (give the run's folder, the one holding last.safetensors)" : "");
  // Refuse what cannot fit, before any large allocation (and, for a new run, before the folder).
  auto check_fits = [](const TrainConfig& c) {
    model::check_memory(c.model, c.batch_size, true);
    model::check_memory(c.model, c.eval_batch_size, false);
  };
  if (!config.resume) check_fits(config);
  // One run at a time in a folder, from before anything in it is read until the run ends (held by
  // the lead rank, which alone writes there).
  if (run.lead()) {
    run.lock = RunLock::acquire(run.files.dir);
    run.files.remove_stale_temporaries();
    if (!config.resume) run.files.refuse_to_replace(config.overwrite);
  }
  if (config.resume) {
    VIT_CHECK(fs::exists(run.files.last), "train", "--resume {}: no checkpoint {} to resume from", config.out_dir,
              run.files.last);
    run.resumed = infer::load_checkpoint(run.files.last);
    VIT_CHECK(run.resumed->scales.empty(), "train",
              "--resume {}: {} is an int8 model (vit quantize), for inference only; resume from its float checkpoint",
              config.out_dir, run.files.last);
    run.config = resume_config(config, *run.resumed, run.files.last);
    const bool data_given = std::count(config.given_flags.begin(), config.given_flags.end(), "--data") > 0;
    VIT_CHECK(data_given || fs::exists(run.config.data_dir), "train",
              "--resume {}: the run's data {} is not there any more; if it moved, give its new place with --data",
              config.out_dir, run.config.data_dir);
    check_fits(run.config);
  }
  load_data(run);
  build_model(run);
  if (!run.config.teacher.empty()) {
    run.teacher = std::make_unique<Teacher>(run.config.teacher, run.config.model);
    const infer::LoadedModel& t = run.teacher->loaded();
    // The teacher sees the student's input: warn when it was trained on other statistics.
    if (t.preprocess.mean != run.norm.mean || t.preprocess.std != run.norm.std) {
      std::fprintf(stderr,
                   "warning: --teacher %s expects inputs normalised with mean [%s] std [%s]; it is given the student's "
                   "(mean [%s] std [%s])\n",
                   run.config.teacher.c_str(), fmt::format("{}", fmt::join(t.preprocess.mean, ", ")).c_str(),
                   fmt::format("{}", fmt::join(t.preprocess.std, ", ")).c_str(),
                   fmt::format("{}", fmt::join(run.norm.mean, ", ")).c_str(),
                   fmt::format("{}", fmt::join(run.norm.std, ", ")).c_str());
    }
  }
  // Everything a checkpoint records, encoded once before the first step: a save can then fail
  // for want of disk space, never over what it records after hours of training.
  (void)infer::checkpoint_metadata(run.files.last, checkpoint_info(run, run.start_epoch, 0, "{}"),
                                   run.config.optimizer);
  run.bar = run.config.progress == 1 || (run.config.progress < 0 && ::isatty(STDOUT_FILENO));
  return run;
}

// ---- checkpoints ----

infer::CheckpointInfo checkpoint_info(const Run& run, int64_t epoch, int64_t batch, std::string epoch_stats_json) {
  return {run.config.model,
          run.config.to_json(),
          epoch,
          run.step,
          run.elapsed(),
          run.train_data.class_names,
          run.norm,
          batch,
          std::move(epoch_stats_json),
          run.data_fingerprint,
          "",
          ""};
}

// Every save goes through here: a failed write (disk full, ...) leaves the previous file intact,
// and the message says so only after checking it.
void save(const Run& run, const std::string& path, const infer::CheckpointInfo& info) {
  if (!run.lead()) return;  // rank 0 writes; the others hold the same weights
  infer::TrainingState state{run.config.optimizer, run.opt->state(), {}};
  if (run.ema) state.ema = run.ema->averages();
  const FileVersion before(path);
  try {
    infer::save_checkpoint(path, *run.model, info, state);
  } catch (const Error& e) {
    const FileVersion after(path);
    const std::string left = !(after == before) ? path + " was changed meanwhile, not by this run"
                             : after.exists     ? "the previous " + path + " is unchanged"
                                                : std::string("no earlier checkpoint exists, so nothing is unchanged");
    fail("train", "could not save a checkpoint: {}. Stopping; {}", e.what(), left);
  }
}

std::string interrupted_message(const Run& run, const StopSignals& signals) {
  return fmt::format("interrupted by {} at step {}: saved {}; continue with: vit train --resume {}", signals.describe(),
                     run.step, run.files.last, run.config.out_dir);
}

// Evaluation shared among the ranks (evaluate.h).
EvalShard eval_shard(Run& run) {
  return {run.comm.rank(), run.comm.size(), [&run](std::vector<double>& v) { run.comm.sum(v); }};
}

// ---- the time budget ----

// Seconds to train `steps` more steps from `step` (a position in epochs of steps_per_epoch),
// with the epoch ends (evaluation and saves, end_seconds each) that fall among them.
double seconds_to_train(int64_t step, int64_t steps, int64_t steps_per_epoch, double step_seconds, double end_seconds) {
  const int64_t ends = epochs_for(step + steps, steps_per_epoch) - epochs_for(step, steps_per_epoch);
  return static_cast<double>(steps) * step_seconds + static_cast<double>(ends) * end_seconds;
}

// The most steps that train from `step` within `seconds` (seconds_to_train grows with the
// steps, so a binary search finds it).
int64_t steps_that_fit(double seconds, int64_t steps_per_epoch, int64_t step, double step_seconds, double end_seconds) {
  int64_t fits = 0, over = static_cast<int64_t>(std::min(std::max(seconds, 0.0) / step_seconds, 1e15)) + 1;
  while (over - fits > 1) {
    const int64_t mid = fits + (over - fits) / 2;
    (seconds_to_train(step, mid, steps_per_epoch, step_seconds, end_seconds) <= seconds ? fits : over) = mid;
  }
  return fits;
}

// At an epoch end of a budgeted run: when the steps left, at the speed measured so far and with
// this epoch end's cost, would end more than 2% away from the budget, re-plans the
// length so they end at it (the cosine continues from where it is: optim::replanned_cosine_lr).
// A shared machine's speed drifts by up to ~30% within minutes; this keeps the run to its budget.
// Under mpirun every rank decides from the lead's clock and the slowest rank's speed.
void keep_to_budget(Run& run, double step_seconds, double end_seconds, double pending_seconds) {
  TrainConfig& c = run.config;
  const int64_t left = run.total_steps - run.step;
  if (c.time_budget <= 0 || left <= 0 || run.step < run.warmup_steps) return;
  step_seconds = run.comm.max(step_seconds);
  end_seconds = run.comm.max(end_seconds);
  double elapsed = run.elapsed();
  run.comm.broadcast(elapsed);
  if (!(step_seconds > 0)) return;
  const double remaining = c.time_budget - elapsed - pending_seconds;  // this epoch end's saves to come
  const double projected = seconds_to_train(run.step, left, run.steps_per_epoch, step_seconds, end_seconds);
  if (std::abs(projected - remaining) <= 0.02 * c.time_budget) return;
  const int64_t fits = std::max<int64_t>(
      1, steps_that_fit(remaining - 0.01 * c.time_budget, run.steps_per_epoch, run.step, step_seconds, end_seconds));
  if (fits == left) return;
  if (c.schedule.empty()) c.schedule.push_back({0, run.total_steps});
  c.schedule.push_back({run.step, run.step + fits});
  std::printf(
      "the machine runs at %.3f s a step now: re-planned the %ld steps left to %ld, to end within the %s budget "
      "(the learning-rate cosine continues from where it is; the checkpoint records the new plan)\n",
      step_seconds, left, fits, duration_str(c.time_budget).c_str());
  set_steps(run, run.step + fits);
}

// Sizes the schedule to --time-budget: times forward + backward on the first batches of epoch 1
// (without updates, so the run's state is untouched and `--steps N` reruns it exactly) and an
// evaluation pass over part of the evaluation set, then fixes the number of steps whose training
// and per-epoch evaluations fit in what is left of the budget.
void fit_budget(Run& run, DataParallel& parallel) {
  TrainConfig& c = run.config;
  const double budget = c.time_budget;
  auto batches = data::epoch_batches(run.train_data.size(), c.batch_size, true, true, c.seed, 0);
  batches.resize(std::min<size_t>(batches.size(), 64));
  data::BatchLoader loader(run.train_data, batches, c.augment, run.norm, true, c.seed, 0, 3, 0, run.comm.rank(),
                           run.comm.size());
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
  const int64_t slice = std::min<int64_t>(run.test_data.size(), 2 * c.eval_batch_size);
  std::vector<int64_t> first(static_cast<size_t>(slice));
  std::iota(first.begin(), first.end(), int64_t{0});
  const data::Dataset part = data::subset(run.test_data, first, run.test_data.source);
  const auto e0 = Clock::now();
  if (slice > 0) (void)evaluate(*run.model, part, run.norm, c.eval_batch_size, eval_shard(run));
  double eval_seconds = std::chrono::duration<double>(Clock::now() - e0).count() *
                        static_cast<double>(run.test_data.size()) / static_cast<double>(std::max<int64_t>(slice, 1));
  // Each epoch end also saves last.safetensors (and best.safetensors when it improves), fsynced:
  // timed on a scratch save beside them, counted twice.
  const std::string scratch = io::temp_path(run.files.last);
  const auto s0 = Clock::now();
  save(run, scratch, checkpoint_info(run, 0, 0, "{}"));
  std::error_code ignored;
  fs::remove(scratch, ignored);
  run.save_seconds = run.comm.max(std::chrono::duration<double>(Clock::now() - s0).count());
  eval_seconds = run.comm.max(eval_seconds) + 2 * run.save_seconds;
  // The most steps S whose training and epoch ends fit in what is left: S * step + ceil(S / steps
  // per epoch) * (evaluation + saves) grows with S, so a binary search finds it. 2% of the budget
  // is kept for the report and the noise of a shared machine.
  double elapsed = run.elapsed();
  run.comm.broadcast(elapsed);  // the lead's clock
  const int64_t steps = steps_that_fit(0.98 * budget - elapsed, run.steps_per_epoch, 0, step_seconds, eval_seconds);
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
}

// ---- one epoch ----

struct EpochResult {
  EpochStats stats;
  Clock::time_point start;     // of this process's part of the epoch
  double train_seconds = 0.0;  // the epoch's training time (without evaluation)
  double seconds() const { return stats.seconds + std::chrono::duration<double>(Clock::now() - start).count(); }
};

// One optimiser step on a batch: forward, backward, finiteness checks, clipping, update, EMA.
// Returns false when the step was skipped (--skip-nonfinite).
bool train_step(Run& run, DataParallel& parallel, const data::Batch& batch, int64_t epoch, Progress& progress,
                EpochResult& e, const StopSignals& signals) {
  const TrainConfig& c = run.config;
  // Dropout masks depend on (seed, step) only, so a resumed run draws the same ones.
  parallel.reseed(c.seed, run.step);
  run.opt->lr = optim::replanned_cosine_lr(run.step, run.warmup_steps, c.schedule, run.total_steps, c.lr, c.min_lr);
  DataParallel::StepResult r = parallel.forward_backward(batch, c.label_smoothing);
  // The ranks' losses and hits add up to the global batch's; a stop signal on any rank stops all
  // of them after this step (mpirun passes Ctrl-C on as SIGTERM to every rank).
  std::vector<double> shared = {r.loss, static_cast<double>(r.correct), static_cast<double>(signals.pending())};
  run.comm.sum(shared);
  r.loss = shared[0];
  r.correct = static_cast<int64_t>(shared[1]);
  run.stop_signal = shared[2] == 0 ? 0 : signals.pending() != 0 ? signals.pending() : SIGTERM;
  // A NaN/Inf loss or gradient: skip the step (--skip-nonfinite) or stop before any update.
  if (const std::string what = step_problem(r.loss, run.params); !what.empty()) {
    progress.finish();
    if (c.skip_nonfinite) {
      std::printf("skipping epoch %ld step %ld: %s\n", epoch + 1, run.step, what.c_str());
      ++e.stats.skipped;
      ++run.step;
      return false;
    }
    fail("train", "{} at epoch {} step {}; stopping without saving. The last good checkpoint is {}", what, epoch + 1,
         run.step, run.files.last_good());
  }
  if (c.clip_grad > 0) optim::clip_grad_norm(run.params, c.clip_grad);
  run.opt->step();
  if (const std::string bad = first_nonfinite(run.params); !bad.empty()) {
    progress.finish();
    fail("train",
         "parameter '{}' became non-finite in the update of epoch {} step {} (learning rate too high?); "
         "stopping without saving. The last good checkpoint is {}",
         bad, epoch + 1, run.step, run.files.last_good());
  }
  if (run.ema) run.ema->update(run.params);
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
  auto batches = data::epoch_batches(run.train_data.size(), c.batch_size, true, true, c.seed, epoch);
  // A schedule in steps ends inside its last epoch.
  const int64_t left = run.total_steps - epoch * run.steps_per_epoch;
  if (left < static_cast<int64_t>(batches.size())) batches.resize(static_cast<size_t>(std::max<int64_t>(left, 0)));
  data::BatchLoader loader(run.train_data, std::move(batches), c.augment, run.norm, true, c.seed, epoch, 3,
                           static_cast<size_t>(batch_index), run.comm.rank(), run.comm.size());
  Progress progress(run.bar, fmt::format("epoch {}/{}", epoch + 1, c.epochs), loader.num_batches());
  auto mid_epoch_info = [&] {
    return checkpoint_info(run, epoch, batch_index,
                           e.stats.to_json(std::chrono::duration<double>(Clock::now() - e.start).count()));
  };
  while (auto batch = loader.next()) {
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
      throw Interrupted(interrupted_message(run, signals), run.stop_signal);
    }
    if (more_batches && c.checkpoint_every > 0 && run.step % c.checkpoint_every == 0) {
      save(run, run.files.last, mid_epoch_info());
    }
  }
  progress.finish();
  e.train_seconds = e.seconds();
  return e;
}

// ---- end of epoch: evaluate, metrics, checkpoints, report ----

// On the test set, with the EMA weights when enabled; a non-finite loss stops the run.
EvalResult evaluate_epoch(Run& run, int64_t epoch) {
  EvalResult eval;
  if (run.ema) {
    optim::NamedTensors current;
    for (const auto& [name, p] : run.params) current.emplace_back(name, p.data().clone());
    assign(run.params, run.ema->averages());
    eval = evaluate(*run.model, run.test_data, run.norm, run.config.eval_batch_size, eval_shard(run));
    assign(run.params, current);
  } else {
    eval = evaluate(*run.model, run.test_data, run.norm, run.config.eval_batch_size, eval_shard(run));
  }
  if (!std::isfinite(eval.loss)) {
    fail("train",
         "test loss is {} after epoch {}: the weights are unusable; stopping without saving. The last good "
         "checkpoint is {}",
         number_str(eval.loss), epoch + 1, run.files.last_good());
  }
  return eval;
}

void end_epoch(Run& run, int64_t epoch, const EpochResult& e, const EvalResult& eval) {
  const TrainConfig& c = run.config;
  const EpochStats& s = e.stats;
  const double epoch_seconds = e.seconds();
  const double elapsed = run.elapsed();
  const double train_loss = s.seen ? s.loss_sum / static_cast<double>(s.seen) : NAN;
  const double train_acc = s.seen ? static_cast<double>(s.correct) / static_cast<double>(s.seen) : NAN;
  const double images_per_s = static_cast<double>(s.seen) / e.train_seconds;
  nlohmann::ordered_json row = {{"epoch", epoch + 1},     {"train_loss", train_loss},     {"train_acc", train_acc},
                                {"test_loss", eval.loss}, {"test_acc", eval.top1},        {"test_top5", eval.top5},
                                {"lr", run.opt->lr},      {"images_per_s", images_per_s}, {"seconds", epoch_seconds},
                                {"elapsed", elapsed},     {"skipped_steps", s.skipped},   {"step", run.step},
                                {"threads", run.threads}, {"ranks", run.comm.size()}};
  if (run.lead()) append_line(run.files.metrics, row.dump());
  const char* set = c.val_split > 0 ? "val" : "test";
  std::printf("epoch %ld/%ld  train loss %.4f acc %.2f%%  %s loss %.4f acc %.2f%%  %.0f img/s  %.1fs (total %.1fs)\n",
              epoch + 1, c.epochs, train_loss, 100 * train_acc, set, eval.loss, 100 * eval.top1, images_per_s,
              epoch_seconds, elapsed);
  // The two weakest classes by name: where the model still errs.
  if (eval.per_class_accuracy.size() > 2 && !run.test_data.class_names.empty()) {
    std::vector<size_t> order(eval.per_class_accuracy.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    auto acc_of = [&](size_t k) {
      return std::isfinite(eval.per_class_accuracy[k]) ? eval.per_class_accuracy[k] : 2.0;  // no images: last
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return acc_of(a) < acc_of(b); });
    auto name = [&](size_t k) {
      return k < run.test_data.class_names.size() ? run.test_data.class_names[k] : std::to_string(k);
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
  const infer::CheckpointInfo info = checkpoint_info(run, epoch + 1, 0, "{}");
  save(run, run.files.last, info);
  if (eval.top1 > run.result.best_test_accuracy) {
    run.result.best_test_accuracy = eval.top1;
    save(run, run.files.best, info);
  }
  run.result.epochs_run = epoch + 1;
  run.result.final_test_accuracy = eval.top1;
  run.result.seconds = elapsed;
  run.last_report = {.epoch = epoch + 1,
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
  if (!run.lead()) return;
  ReportInputs report;
  report.config = &c;
  report.metrics = read_metrics(run.files.metrics);
  report.eval = &eval;
  report.eval_data = &run.test_data;
  report.total_steps = run.total_steps;
  report.warmup_steps = run.warmup_steps;
  report.steps_per_epoch = run.steps_per_epoch;
  report.benchmark = run.benchmark;
  write_report(run.files.report, report);
  std::fflush(stdout);
}

// Resuming a run that has already run all its epochs: its real numbers, from metrics.jsonl.
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
  std::printf(" wrote %s\n", c.out_dir.c_str());
  if (c.time_budget > 0) {
    std::printf("time budget %s: used %.1f s (%.1f%%, evaluation included)\n", duration_str(c.time_budget).c_str(),
                result.seconds, 100 * result.seconds / c.time_budget);
  }
  if (run.benchmark && c.val_split == 0 && std::isfinite(result.final_test_accuracy)) {
    std::printf("%s benchmark (%s):\n", run.benchmark->dataset.c_str(), run.benchmark->source.c_str());
    const std::string ours = fmt::format("vit: this run ({}, {})", c.model.name, duration_str(result.seconds));
    for (const PlacedRow& r : place(*run.benchmark, ours, result.final_test_accuracy)) {
      std::printf("  %s %5.1f%%  %s\n", r.ours ? "->" : "  ", 100 * r.row.accuracy, r.row.method.c_str());
    }
    std::printf("this run sits %s\n", placement_text(*run.benchmark, result.final_test_accuracy).c_str());
  }
}

// Every rank's start went well, and every rank has the lead's configuration and data; otherwise
// every rank stops, the ones that differ naming what.
void agree_on_start(Run* run, const std::exception_ptr& failed, dist::Comm& comm) {
  std::vector<double> failures = {failed ? 1.0 : 0.0};
  comm.sum(failures);
  if (failed) std::rethrow_exception(failed);
  if (failures[0] > 0)
    fail("train", "{} of the {} ranks could not start (their messages say why); stopping them all",
         static_cast<int64_t>(failures[0]), comm.size());
  const TrainConfig& c = run->config;
  // What must be the same everywhere: the run's saved configuration (minus the data's path,
  // which may differ between hosts), the model, the data and the normalisation.
  nlohmann::json mine = nlohmann::json::parse(c.to_json());
  mine.erase("data_dir");
  mine["model"] = nlohmann::json::parse(c.model.to_json());
  mine["data"] = nlohmann::json::parse(run->data_fingerprint);
  mine["normalization"] = {run->norm.mean, run->norm.std};
  mine["resumed_at_step"] = run->step;
  std::string lead = mine.dump();
  comm.broadcast(lead);
  const nlohmann::json theirs = nlohmann::json::parse(lead);
  std::vector<std::string> differences;
  for (const auto& [key, value] : theirs.items()) {
    if (!mine.contains(key) || mine[key] != value)
      differences.push_back(
          fmt::format("{}: {} here, {} on rank 0", key, mine.value(key, nlohmann::json()).dump(), value.dump()));
  }
  for (const auto& [key, value] : mine.items()) {
    if (!theirs.contains(key)) differences.push_back(fmt::format("{}: {} here, absent on rank 0", key, value.dump()));
  }
  std::vector<double> differ = {differences.empty() ? 0.0 : 1.0};
  comm.sum(differ);
  if (!differences.empty()) {
    fail("train",
         "{}: its configuration or data differ from rank 0's ({}); every rank must run the same `vit train` "
         "flags on the same data",
         comm.describe(comm.rank()), fmt::join(differences, "; "));
  }
  if (differ[0] > 0)
    fail("train",
         "{} of the {} ranks have a configuration or data that differ from rank 0's (their messages say "
         "what); every rank must run the same `vit train` flags on the same data",
         static_cast<int64_t>(differ[0]), comm.size());
  VIT_CHECK(c.batch_size >= comm.size(), "train",
            "--batch-size {} is the global batch: it needs at least one image "
            "for each of the {} ranks",
            c.batch_size, comm.size());
}

// At epoch ends: the ranks' weights are still the same (each applies the same summed gradient;
// a difference would mean a broken reduction), compared by a hash.
void check_replicas_agree(const Run& run, int64_t epoch) {
  if (!run.comm.distributed()) return;
  io::Xxh64 hash;  // the checkpoints' checksum: several GB/s
  for (const auto& [name, p] : run.params) {
    hash.update(p.data().data<float>(), static_cast<size_t>(p.numel()) * sizeof(float));
  }
  const std::vector<std::string> all = run.comm.all_gather(fmt::format("{:016x}", hash.digest()));
  for (int r = 1; r < run.comm.size(); ++r) {
    VIT_CHECK(all[r] == all[0], "train",
              "after epoch {} the weights of {} differ from rank 0's: the gradient "
              "reduction went wrong; stopping",
              epoch + 1, run.comm.describe(r));
  }
}

TrainResult train_job(TrainConfig config, dist::Comm& comm) {
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
    if (c.time_budget > 0 && c.steps == 0) fit_budget(run, parallel);
    if (run.start_epoch >= c.epochs) {
      report_complete(run);
      return run.result;
    }
    for (int64_t epoch = run.start_epoch; epoch < c.epochs; ++epoch) {
      const EpochResult trained = train_epoch(run, parallel, signals, epoch);  // Interrupted: saved mid-epoch
      const auto evaluated_from = Clock::now();
      const EvalResult eval = evaluate_epoch(run, epoch);
      if (c.time_budget > 0 && trained.stats.steps > 0) {
        // The speed so far in this process (all its epochs: one epoch's speed jitters too much).
        run.trained_seconds += trained.train_seconds - run.carried_seconds;
        run.trained_steps += trained.stats.steps - run.carried_steps;
        run.carried_seconds = 0;
        run.carried_steps = 0;
        const double end = std::chrono::duration<double>(Clock::now() - evaluated_from).count() + 2 * run.save_seconds;
        if (run.trained_steps > 0) {
          keep_to_budget(run, run.trained_seconds / static_cast<double>(run.trained_steps), end, 2 * run.save_seconds);
        }
      }
      check_replicas_agree(run, epoch);
      end_epoch(run, epoch, trained, eval);  // metrics, checkpoints, report
      const int stop = static_cast<int>(comm.max(run.stop_signal ? run.stop_signal : signals.pending()));
      if (stop != 0 && epoch + 1 < c.epochs) {
        comm.barrier(true);  // the lead has saved
        throw Interrupted(interrupted_message(run, signals), stop);
      }
      // Under mpirun every rank runs the callback; the ranks stop together if any of them asks.
      if (c.on_epoch && comm.max(c.on_epoch(run.last_report) ? 0.0 : 1.0) > 0 && epoch + 1 < c.epochs) {
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
  } catch (const dist::PeerLost& e) {
    throw dist::PeerLost(
        fmt::format("{}; stopping at step {}. The last good checkpoint is {} (nothing newer was "
                    "written); continue with: vit train --resume {}",
                    e.what(), run.step, run.files.last_good(), c.out_dir));
  }
  if (GradientReducer* reducer = parallel.reducer(); reducer && comm.distributed() && reducer->steps() > 0) {
    // How much of the communication the backward pass hid. Each rank waits after its backward
    // for the sums to finish; the rank that finishes backward last waits only for what the
    // overlap did not hide (the others also wait for it: that part is the ranks' skew). So the
    // least wait over the ranks, against the same sums alone.
    const double mine = reducer->exposed_seconds() / static_cast<double>(reducer->steps());
    const double least = -comm.max(-mine), most = comm.max(mine);
    const double alone = reducer->time_alone();
    std::printf(
        "gradient sums: %.2f MB a step in %d buckets, %.2f ms alone; after backward the ranks waited %.2f-%.2f ms a "
        "step, the last to finish %.2f ms: %.0f%% of the communication hidden\n",
        static_cast<double>(reducer->gradient_bytes()) / 1e6, reducer->num_buckets(), 1e3 * alone, 1e3 * least,
        1e3 * most, 1e3 * least, alone > 0 ? 100 * std::max(0.0, 1 - least / alone) : 0.0);
  }
  print_summary(run);
  return run.result;
}

}  // namespace

TrainResult train(TrainConfig config) {
  dist::Comm& comm = dist::Comm::world();
  // Rank 0 alone prints (errors, on stderr, come from any rank).
  if (comm.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    std::fprintf(stderr, "warning: %s could not silence its output\n", comm.describe(comm.rank()).c_str());
  }
  return train_job(std::move(config), comm);
}

}  // namespace vit::train
