// The training loop (see trainer.h).
#include "train/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/gemm.h"
#include "kernels/optim.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/progress.h"
#include "train/report.h"

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

  std::string to_json(double more_seconds) const {
    return nlohmann::json{{"loss_sum", loss_sum}, {"correct", correct}, {"seen", seen}, {"steps", steps},
                          {"skipped", skipped},   {"seconds", seconds + more_seconds}}.dump();
  }
  static EpochStats from_json(const std::string& text, const std::string& path) {
    EpochStats s;
    try {
      const auto j = nlohmann::json::parse(text);
      s.loss_sum = j.at("loss_sum").get<double>();
      s.correct = j.at("correct").get<int64_t>();
      s.seen = j.at("seen").get<int64_t>();
      s.steps = j.at("steps").get<int64_t>();
      s.skipped = j.at("skipped").get<int64_t>();
      s.seconds = j.at("seconds").get<double>();
    } catch (const nlohmann::json::exception& e) {
      fail("train", "{}: corrupt epoch statistics in the checkpoint ({})", path, e.what());
    }
    return s;
  }
};

// SIGINT / SIGTERM while training: the handler only records the signal; the loop saves a
// checkpoint after the current step and stops. SA_RESETHAND: a second Ctrl-C kills at once
// (safe, since checkpoints are replaced atomically).
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = record_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int pending() const { return g_stop_signal; }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

void append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  VIT_CHECK(out.good(), "train", "{}: cannot write", path);
}

// Keeps the first `epochs` lines of metrics.jsonl (a resumed run rewrites what follows). The
// new file replaces the old by rename, so a kill at any moment leaves one or the other whole
// (found by the SIGKILL test: truncating in place could lose every line).
void truncate_metrics(const std::string& path, int64_t epochs) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line) && static_cast<int64_t>(lines.size()) < epochs;) lines.push_back(line);
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& line : lines) out << line << "\n";
    out.flush();
    VIT_CHECK(out.good(), "train", "{}: cannot write", tmp);
  }
  fs::rename(tmp, path);
}

// The first parameter (model order) holding a NaN or infinity, or "" if all are finite.
std::string first_nonfinite(const optim::NamedParameters& params) {
  for (const auto& [name, p] : params) {
    if (!std::isfinite(kernels::sum_squares(p.data().data<float>(), p.numel()))) return name;
  }
  return "";
}

// "'name' (|w| up to X)" for the parameter with the largest magnitude: where to look when the
// forward pass overflowed with finite weights.
std::string largest_parameter(const optim::NamedParameters& params) {
  std::string best;
  float best_abs = -1.0f;
  for (const auto& [name, p] : params) {
    const Tensor t = p.data().contiguous();
    const float* v = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (std::fabs(v[i]) > best_abs) {
        best_abs = std::fabs(v[i]);
        best = name;
      }
    }
  }
  return fmt::format("'{}' (|w| up to {:.3g})", best, best_abs);
}

// The parameter whose gradient went non-finite first during backpropagation: backward runs
// from the head to the patch embedding, so that is the last one in model order; "" if none.
std::string first_nonfinite_grad(const optim::NamedParameters& params) {
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& g = it->second.grad();
    if (g.defined() && !std::isfinite(kernels::sum_squares(g.contiguous().data<float>(), g.numel()))) return it->first;
  }
  return "";
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

// Copies tensors into the model's parameters (same names, same order).
void assign(const optim::NamedParameters& params, const optim::NamedTensors& values) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor dst = params[i].second.data();
    dst.copy_(values[i].second);
  }
}

}  // namespace

TrainResult train(TrainConfig config) {
  if (!config.resume) config.validate();
  if (config.threads > 0) {
    omp_set_num_threads(config.threads);
    kernels::set_blas_threads(config.threads);
  }
  const int threads = omp_get_max_threads();
  const fs::path out_dir(config.out_dir);
  VIT_CHECK(!fs::exists(out_dir) || fs::is_directory(out_dir), "train", "--out {}: exists and is not a directory",
            config.out_dir);
  const std::string last_path = (out_dir / "last.safetensors").string();
  const std::string best_path = (out_dir / "best.safetensors").string();
  const std::string metrics_path = (out_dir / "metrics.jsonl").string();
  const std::string report_path = (out_dir / "report.html").string();
  // What a failure message points the user back to.
  auto last_good = [&last_path] { return fs::exists(last_path) ? last_path : std::string("(none written yet)"); };

  // ---- resume: configs, weights, optimiser, EMA and position come from the checkpoint ----
  std::optional<LoadedCheckpoint> resumed;
  if (config.resume) {
    VIT_CHECK(fs::exists(last_path), "train", "--resume {}: no checkpoint {} to resume from", config.out_dir, last_path);
    resumed = load_checkpoint(last_path);
    TrainConfig saved = TrainConfig::from_json(resumed->info.train_config_json);
    VIT_CHECK(!config.model_explicit || resumed->info.model.same_architecture(config.model),
              "train", "{}: checkpoint is a different model ({} dim {} depth {} heads {}) than requested ({} dim {} depth {} "
              "heads {})", last_path, resumed->info.model.name, resumed->info.model.dim, resumed->info.model.depth,
              resumed->info.model.num_heads, config.model.name, config.model.dim, config.model.depth,
              config.model.num_heads);
    saved.model = resumed->info.model;
    // --epochs on resume extends (or keeps) the schedule; without it the saved one continues.
    if (config.epochs > 0) saved.epochs = std::max(config.epochs, resumed->info.epoch);
    saved.out_dir = config.out_dir;
    saved.threads = config.threads;
    saved.progress = config.progress;
    saved.stop_after_epoch = config.stop_after_epoch;
    saved.checkpoint_every = config.checkpoint_every;
    saved.max_pixels = config.max_pixels;
    saved.resume = true;
    config = saved;
    config.validate();
  }

  // ---- refuse what cannot fit, before any large allocation ----
  const model::ViTConfig& mc = config.model;
  model::check_memory(mc, config.batch_size, true);
  model::check_memory(mc, config.eval_batch_size, false);

  // ---- data ----
  data::Dataset train_data =
      data::load_dataset(config.data_dir, data::Split::Train, mc.in_channels, mc.image_size, config.max_pixels);
  data::Dataset test_data =
      data::load_dataset(config.data_dir, data::Split::Test, mc.in_channels, mc.image_size, config.max_pixels);
  for (const data::Dataset* d : {&train_data, &test_data}) {
    VIT_CHECK(d->channels == mc.in_channels && d->height == mc.image_size && d->width == mc.image_size, "train",
              "{}: images are {}x{}x{} but the model expects {}x{}x{}", d->source, d->channels, d->height, d->width,
              mc.in_channels, mc.image_size, mc.image_size);
    VIT_CHECK(d->num_classes() <= mc.num_classes, "train", "{}: {} classes but the model has {} outputs", d->source,
              d->num_classes(), mc.num_classes);
  }
  const bool digits = train_data.class_names == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  const data::Normalization norm =
      resumed ? resumed->info.normalization : data::default_normalization(mc.in_channels, digits);

  // ---- model, optimiser, EMA ----
  auto gen = std::make_shared<Generator>(config.seed);
  model::VisionTransformer model(mc, gen);
  const optim::NamedParameters params = model.named_parameters();
  std::unique_ptr<optim::Optimizer> opt;
  if (config.optimizer == "adamw") {
    opt = std::make_unique<optim::AdamW>(params, config.lr, config.weight_decay);
  } else {
    opt = std::make_unique<optim::SGD>(params, config.lr, config.momentum, config.weight_decay);
  }
  std::unique_ptr<optim::ModelEma> ema;
  if (config.ema_decay > 0) ema = std::make_unique<optim::ModelEma>(params, config.ema_decay);
  int64_t start_epoch = 0;
  double elapsed_before = 0.0;
  if (resumed) {
    model.load_state_dict(resumed->weights);
    opt->load_state(resumed->optimizer);
    if (ema) {
      VIT_CHECK(resumed->ema.size() == params.size(), "train", "{}: EMA weights missing from the checkpoint", last_path);
      for (size_t i = 0; i < params.size(); ++i) ema->averages()[i].second.copy_(resumed->ema[i].second);
    }
    start_epoch = resumed->info.epoch;
    elapsed_before = resumed->info.elapsed_seconds;
    truncate_metrics(metrics_path, start_epoch);
  } else {
    fs::create_directories(out_dir);
    std::ofstream(metrics_path, std::ios::trunc).close();
  }

  const int64_t steps_per_epoch = static_cast<int64_t>(
      data::epoch_batches(train_data.size(), config.batch_size, true, true, config.seed, 0).size());
  const int64_t total_steps = steps_per_epoch * config.epochs;
  const auto warmup_steps = static_cast<int64_t>(std::llround(config.warmup_epochs * static_cast<double>(steps_per_epoch)));
  const model::ComputeCost cost = model::macs_per_image(mc);
  std::printf("model %s: %ld parameters, %.2f MMACs per image; %ld training / %ld test images from %s\n",
              mc.name.c_str(), model.num_parameters(), static_cast<double>(cost.total()) / 1e6, train_data.size(),
              test_data.size(), config.data_dir.c_str());
  std::printf("training %ld epochs x %ld steps (batch %ld, %s lr %g, %d threads) -> %s\n", config.epochs,
              steps_per_epoch, config.batch_size, config.optimizer.c_str(), config.lr, threads, config.out_dir.c_str());
  if (resumed) std::printf("resumed from %s at epoch %ld\n", last_path.c_str(), start_epoch);
  std::fflush(stdout);

  const bool bar = config.progress == 1 || (config.progress < 0 && ::isatty(STDOUT_FILENO));
  TrainResult result;
  const std::vector<double> thresholds = {0.97, 0.985};
  for (double t : thresholds) result.milestones.emplace_back(t, -1.0);
  for (const auto& row : read_metrics(metrics_path)) {  // milestones already passed before a resume
    const double acc = metric(row, "test_acc");
    if (acc > result.best_test_accuracy) result.best_test_accuracy = acc;
    for (auto& [t, at] : result.milestones) {
      if (at < 0 && acc >= t) at = metric(row, "elapsed");
    }
  }
  DataParallel parallel(model, threads);
  const auto train_start = Clock::now();
  int64_t step = resumed ? resumed->info.step : 0;
  // Mid-epoch resume: skip the batches already trained on and carry the epoch's statistics.
  int64_t first_batch = resumed ? resumed->info.batch : 0;
  EpochStats carried;
  if (resumed && first_batch > 0) carried = EpochStats::from_json(resumed->info.epoch_stats_json, last_path);
  const StopSignals signals;
  auto interrupted_message = [&] {
    return fmt::format("interrupted by {} at step {}: saved {}; continue with: vit train --resume {}",
                       signals.pending() == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM", step, last_path, config.out_dir);
  };
  auto elapsed_now = [&] { return elapsed_before + std::chrono::duration<double>(Clock::now() - train_start).count(); };
  // Every save goes through here: a failed write (disk full, ...) leaves the previous file intact.
  auto save = [&](const std::string& path, const CheckpointInfo& info) {
    try {
      save_checkpoint(path, model, opt.get(), ema.get(), info);
    } catch (const Error& e) {
      fail("train", "could not save a checkpoint: {}. Stopping; {} is unchanged", e.what(),
           fs::exists(path) ? "the previous " + path : std::string("no earlier checkpoint exists, so nothing"));
    }
  };

  for (int64_t epoch = start_epoch; epoch < config.epochs; ++epoch) {
    const auto epoch_start = Clock::now();
    model.train();
    data::BatchLoader loader(train_data, data::epoch_batches(train_data.size(), config.batch_size, true, true,
                                                             config.seed, epoch),
                             config.augment, norm, true, config.seed, epoch, 3, static_cast<size_t>(first_batch));
    Progress progress(bar, fmt::format("epoch {}/{}", epoch + 1, config.epochs), loader.num_batches());
    EpochStats stats = first_batch > 0 ? carried : EpochStats{};
    int64_t batch_index = first_batch;
    first_batch = 0;
    auto epoch_seconds_so_far = [&] {
      return stats.seconds + std::chrono::duration<double>(Clock::now() - epoch_start).count();
    };
    auto mid_epoch_info = [&] {
      CheckpointInfo info{mc, config.to_json(), epoch, step, elapsed_now(), train_data.class_names, norm, batch_index, {}};
      info.epoch_stats_json = stats.to_json(std::chrono::duration<double>(Clock::now() - epoch_start).count());
      return info;
    };
    while (auto batch = loader.next()) {
      // Dropout masks depend on (seed, step) only, so a resumed run draws the same ones.
      parallel.reseed(config.seed, step);
      opt->lr = optim::warmup_cosine_lr(step, warmup_steps, total_steps, config.lr, config.min_lr);
      const DataParallel::StepResult step_result = parallel.forward_backward(*batch, config.label_smoothing);
      const double loss_value = step_result.loss;
      // A NaN/Inf loss or gradient: skip the step (--skip-nonfinite) or stop before any update.
      const std::string bad_grad = first_nonfinite_grad(params);
      if (!std::isfinite(loss_value) || !bad_grad.empty()) {
        // (Weights are checked after every update, so here they are finite.)
        const std::string what =
            !std::isfinite(loss_value)
                ? fmt::format("loss is {} (the forward pass overflowed; all weights are finite, the largest is {})",
                              number_str(loss_value), largest_parameter(params))
                : fmt::format("gradient of '{}' went non-finite first in backpropagation (loss {})", bad_grad,
                              number_str(loss_value));
        if (config.skip_nonfinite) {
          progress.finish();
          std::printf("skipping epoch %ld step %ld: %s\n", epoch + 1, step, what.c_str());
          ++stats.skipped;
          ++step;
          ++batch_index;
          continue;
        }
        progress.finish();
        fail("train", "{} at epoch {} step {}; stopping without saving. The last good checkpoint is {}", what,
             epoch + 1, step, last_good());
      }
      if (config.clip_grad > 0) optim::clip_grad_norm(params, config.clip_grad);
      opt->step();
      if (const std::string bad = first_nonfinite(params); !bad.empty()) {
        progress.finish();
        fail("train", "parameter '{}' became non-finite in the update of epoch {} step {} (learning rate too high?); "
             "stopping without saving. The last good checkpoint is {}", bad, epoch + 1, step, last_good());
      }
      if (ema) ema->update(params);
      ++step;
      ++batch_index;
      const auto B = batch->targets.numel();
      stats.correct += step_result.correct;
      stats.seen += B;
      stats.loss_sum += loss_value * static_cast<double>(B);
      ++stats.steps;
      const double seconds = epoch_seconds_so_far();
      progress.update(batch_index, stats.loss_sum / static_cast<double>(stats.seen),
                      static_cast<double>(stats.correct) / static_cast<double>(stats.seen),
                      static_cast<double>(stats.seen) / seconds, seconds);
      // After the epoch's last batch the epoch-end checkpoint below serves both purposes.
      const bool more_batches = batch_index < static_cast<int64_t>(loader.num_batches());
      if (more_batches && signals.pending()) {
        progress.finish();
        save(last_path, mid_epoch_info());
        throw Interrupted(interrupted_message());
      }
      if (more_batches && config.checkpoint_every > 0 && step % config.checkpoint_every == 0) {
        save(last_path, mid_epoch_info());
      }
    }
    const double train_seconds = epoch_seconds_so_far();

    // ---- evaluate (EMA weights when enabled), record, checkpoint ----
    EvalResult eval;
    if (ema) {
      optim::NamedTensors current;
      for (const auto& [name, p] : params) current.emplace_back(name, p.data().clone());
      assign(params, ema->averages());
      eval = evaluate(model, test_data, norm, config.eval_batch_size);
      assign(params, current);
    } else {
      eval = evaluate(model, test_data, norm, config.eval_batch_size);
    }
    if (!std::isfinite(eval.loss)) {
      progress.finish();
      fail("train", "test loss is {} after epoch {}: the weights are unusable; stopping without saving. The last good "
           "checkpoint is {}", number_str(eval.loss), epoch + 1, last_good());
    }
    const double epoch_seconds = epoch_seconds_so_far();
    const double elapsed = elapsed_now();
    const double train_loss = stats.seen ? stats.loss_sum / static_cast<double>(stats.seen) : NAN;
    const double train_acc = stats.seen ? static_cast<double>(stats.correct) / static_cast<double>(stats.seen) : NAN;
    const double images_per_s = static_cast<double>(stats.seen) / train_seconds;
    progress.finish();
    nlohmann::ordered_json row = {{"epoch", epoch + 1},      {"train_loss", train_loss}, {"train_acc", train_acc},
                                  {"test_loss", eval.loss},  {"test_acc", eval.top1},    {"test_top5", eval.top5},
                                  {"lr", opt->lr},           {"images_per_s", images_per_s},
                                  {"seconds", epoch_seconds}, {"elapsed", elapsed},      {"skipped_steps", stats.skipped}};
    append_line(metrics_path, row.dump());
    std::printf("epoch %ld/%ld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.0f img/s  %.1fs (total %.1fs)\n",
                epoch + 1, config.epochs, train_loss, 100 * train_acc, eval.loss, 100 * eval.top1, images_per_s,
                epoch_seconds, elapsed);
    for (auto& [t, at] : result.milestones) {
      if (at < 0 && eval.top1 >= t) {
        at = elapsed;
        std::printf("reached %.1f%% test accuracy after %.1f s of training (epoch %ld)\n", 100 * t, elapsed, epoch + 1);
      }
    }
    CheckpointInfo info{mc, config.to_json(), epoch + 1, step, elapsed, train_data.class_names, norm, 0, "{}"};
    save(last_path, info);
    if (eval.top1 > result.best_test_accuracy) {
      result.best_test_accuracy = eval.top1;
      save(best_path, info);
    }
    write_report(report_path, mc, config.to_json(), read_metrics(metrics_path), eval, test_data);
    std::fflush(stdout);
    result.epochs_run = epoch + 1;
    result.final_test_accuracy = eval.top1;
    result.seconds = elapsed;
    if (signals.pending() && epoch + 1 < config.epochs) throw Interrupted(interrupted_message());
    if (config.stop_after_epoch > 0 && epoch + 1 >= config.stop_after_epoch && epoch + 1 < config.epochs) {
      std::printf("stopping after epoch %ld of %ld as asked; continue with --resume %s\n", epoch + 1, config.epochs,
                  config.out_dir.c_str());
      return result;
    }
  }
  std::printf("done: test accuracy %.2f%% (best %.2f%%) after %.1f s;", 100 * result.final_test_accuracy,
              100 * result.best_test_accuracy, result.seconds);
  for (const auto& [t, at] : result.milestones) {
    if (at >= 0) std::printf(" %.1f%% at %.1f s;", 100 * t, at);
    else std::printf(" %.1f%% not reached;", 100 * t);
  }
  std::printf(" wrote %s\n", config.out_dir.c_str());
  return result;
}

}  // namespace vit::train
