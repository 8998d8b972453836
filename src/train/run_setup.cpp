// Starting or resuming a run (see run_setup.h).
#include "train/run_setup.h"

#include <fmt/ranges.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "data/epoch_plan.h"
#include "data/loader.h"
#include "infer/load_model.h"
#include "infer/request.h"
#include "kernels/gemm/bf16_gemm.h"
#include "kernels/threads.h"
#include "train/budget.h"
#include "train/init_from.h"
#include "train/report.h"
#include "train/resume.h"
#include "train/utf8.h"

namespace vit::train {
namespace fs = std::filesystem;
namespace {

// --val-split N: N training images, drawn with a fixed seed (the same for every --seed, so runs
// compare on one validation set), become the evaluation set; the test set is set aside unread.
void hold_out(Run& run) {
  const int64_t n = run.config.val_split, size = run.data.train.size();
  VIT_CHECK(n < size, "train", "--val-split {}: the training set {} has only {} images (some must be left to train on)",
            n, run.data.train.source, size);
  std::vector<int64_t> order = data::epoch_batches(size, size, true, false, 0x7a11da7e, 0).front();
  std::sort(order.end() - n, order.end());  // the validation images, in dataset order
  std::sort(order.begin(), order.end() - n);
  const std::vector<int64_t> train(order.begin(), order.end() - n), val(order.end() - n, order.end());
  const data::Dataset all = std::move(run.data.train);
  run.data.train = data::subset(all, train, fmt::format("{} ({} images left to train on)", all.source, size - n));
  run.data.test = data::subset(all, val, fmt::format("{} ({} held-out validation images)", all.source, n));
  std::printf("validation: %ld of the %ld training images held out (--val-split); the test set is not used\n", n, size);
}

// Images of one class teach a classifier nothing (it scores 100% by answering that class): refused.
void refuse_one_class(const data::Dataset& train) {
  if (train.size() == 0) return;  // an empty split has its own message
  const int64_t first = train.labels.front();
  const bool one = std::all_of(train.labels.begin(), train.labels.end(), [&](int64_t l) { return l == first; });
  VIT_CHECK(!one, "train",
            "{}: every training image is of one class ('{}'): a classifier needs images of at least 2 classes to "
            "learn anything (with one it scores 100% by always answering it)",
            train.source,
            first >= 0 && first < train.num_classes() ? train.class_names[static_cast<size_t>(first)]
                                                      : std::to_string(first));
}

// A new run's head: one output per class of the training data, unless --num-classes set it (a
// preset's count is a default; a 10-class preset on 3 class folders trains a 3-way head).
void size_head(Run& run) {
  model::ViTConfig& mc = run.config.model;
  const auto classes = static_cast<int64_t>(run.data.train.class_names.size());
  if (run.config.num_classes_given || classes == 0 || classes == mc.num_classes || mc.num_classes == 0) return;
  std::printf("classes: %ld in %s, so the head has %ld outputs (%s's default is %ld; --num-classes sets it)\n", classes,
              run.data.train.source.c_str(), classes, mc.name.c_str(), mc.num_classes);
  mc.num_classes = classes;
}

// `resumed`: the checkpoint a resumed run continues from, else null; `init`: the model file a
// fine-tuning run starts from, else null.
void load_data(Run& run, const checkpoint::LoadedCheckpoint* resumed, InitSource* init) {
  const TrainConfig& c = run.config;
  const model::ViTConfig& mc = c.model;
  const data::Residency residency = data::parse_residency(c.data_residency);
  data::set_loader_threads(c.loader_threads);
  run.data.train =
      data::load_dataset(c.data_dir, data::Split::Train, mc.in_channels, mc.image_size, c.max_pixels, residency);
  // Fine-tuning: the --init model's evaluation transform (a resumed run: the one its checkpoint records).
  if (init) {
    run.eval_transform = infer::at_size(init->loaded.preprocess, mc.image_size);
  } else if (resumed && !resumed->info.preprocess_json.empty()) {
    run.eval_transform = infer::parse_preprocess(resumed->info.preprocess_json, mc.in_channels, c.out_dir);
  }
  data::ImageShaper shaper;
  if (run.eval_transform) {
    shaper = [p = *run.eval_transform, channels = mc.in_channels](const data::Image& image) {
      return infer::resize_and_crop(data::convert_channels(image, channels), p);
    };
  }
  run.data.test =
      data::load_dataset(c.data_dir, data::Split::Test, mc.in_channels, mc.image_size, c.max_pixels, residency, shaper);
  for (const data::Dataset* d : {&run.data.train, &run.data.test}) {
    if (const std::string note = data::skipped_note(*d); !note.empty() && run.lead())
      std::fprintf(stderr, "note: %s\n", note.c_str());
    if (d->streamed() && run.lead()) {
      std::printf("data: %s: %ld images streamed from disk (%.0f MiB decoded at %ldx%ldx%ld; %d loader threads)\n",
                  d->source.c_str(), d->size(),
                  static_cast<double>(d->size()) * static_cast<double>(d->image_bytes()) / (1024.0 * 1024.0),
                  d->channels, d->height, d->width, data::loader_threads());
    }
  }
  // Class names (folder names, classes.txt lines) are any bytes, but checkpoints and report.html
  // record them as UTF-8 text: bytes that are not are recorded as "\xHH" (they are labels only,
  // never used to find files again).
  const std::vector<std::string> escaped = escape_class_names(run.data.train);
  (void)escape_class_names(run.data.test);
  if (!escaped.empty()) {
    std::printf("class names that are not valid UTF-8 are recorded with \\x escapes: %s\n",
                fmt::format("{}", fmt::join(escaped, ", ")).c_str());
  }
  // Labels by class name, not by position in each split's own list: the names the model was
  // trained with are the truth (the checkpoint's when resuming, else the training split's).
  const bool by_checkpoint = resumed && !resumed->info.class_names.empty();
  std::string whose =
      by_checkpoint ? "the checkpoint " + run.files.last : "the training split (" + run.data.train.source + ")";
  std::vector<std::string> known = by_checkpoint ? resumed->info.class_names : run.data.train.class_names;
  if (init) {  // fine-tuning: a kept head's classes are the truth
    std::vector<std::string> head = fit_init_to_data(run.config, *init, run.data.train);
    if (!head.empty()) {
      known = std::move(head);
      whose = "the head of --init " + init->path;
    }
  }
  for (data::Dataset* d : {&run.data.train, &run.data.test}) {
    const std::vector<std::string> missing = data::map_classes(*d, known, whose);
    if (!missing.empty()) fmt::print(stderr, "note: {} has no images of: {}\n", d->source, fmt::join(missing, ", "));
  }
  refuse_one_class(run.data.train);
  if (!resumed && !init) size_head(run);
  // A resumed run continues on the data it was trained on: refused otherwise, moved is fine.
  run.data.fingerprint = dataset_fingerprint(run.data.train, run.data.test);
  run.data.benchmark = known_benchmark(run.data.train.class_names, run.data.train.size(), run.data.test.size());
  if (resumed) {
    const std::string run_data_dir = TrainConfig::from_json(resumed->info.train_config_json).data_dir;
    if (check_same_data(resumed->info, run_data_dir, c.data_dir, run.data.train, run.data.fingerprint)) {
      std::printf("data: %s (the run's data, moved from %s)\n", c.data_dir.c_str(), run_data_dir.c_str());
    }
  }
  if (c.val_split > 0) hold_out(run);
  for (const data::Dataset* d : {&run.data.train, &run.data.test}) {
    VIT_CHECK(d->channels == mc.in_channels && d->height == mc.image_size && d->width == mc.image_size, "train",
              "{}: images are {}x{}x{} but the model expects {}x{}x{}{}", d->source, d->channels, d->height, d->width,
              mc.in_channels, mc.image_size, mc.image_size,
              init ? fmt::format(" (the --init file's; --image-size {} resamples its position embedding where the "
                                 "patch size {} divides it; image folders are resized to the model's size)",
                                 d->height, mc.patch_size)
                   : std::string());
    VIT_CHECK(d->num_classes() <= mc.num_classes, "train", "{}: {} classes but the model has {} outputs", d->source,
              d->num_classes(), mc.num_classes);
  }
  // The normalisation: the checkpoint's when resuming, else the recipe's, else the data's own.
  if (resumed)
    run.data.norm = resumed->info.normalization;
  else if (!c.normalization.mean.empty())
    run.data.norm = c.normalization;
  else
    run.data.norm = data::compute_normalization(run.data.train);
}

// The model, optimiser and EMA, restored from the checkpoint when resuming (a fine-tuning run's
// first weights from its --init file); metrics.jsonl kept up to the checkpoint's epoch (or
// started empty). --freeze backbone leaves the optimiser the head alone; layer decay and a head
// learning rate are per-parameter lr scales.
void build_model(Run& run, const checkpoint::LoadedCheckpoint* resumed, const InitSource* init) {
  const TrainConfig& c = run.config;
  run.model = std::make_unique<model::VisionTransformer>(c.model, std::make_shared<Generator>(c.seed));
  run.params = run.model->named_parameters();
  run.averaged = run.model->named_state();
  if (init) load_init_weights(*run.model, *init, c);
  optim::NamedParameters trained;
  for (auto& [name, p] : run.params) {
    if (c.freeze == "backbone" && !is_head_parameter(name)) {
      p.requires_grad_(false);
    } else {
      trained.emplace_back(name, p);
    }
  }
  VIT_CHECK(!trained.empty(), "train", "--freeze backbone: the model has no head to train");
  if (c.optimizer == "adamw") {
    run.opt = std::make_unique<optim::AdamW>(trained, c.lr, c.weight_decay);
  } else {
    run.opt = std::make_unique<optim::SGD>(trained, c.lr, c.momentum, c.weight_decay);
  }
  run.opt->set_lr_scales(lr_scales(trained, c));
  if (c.ema_decay > 0) run.ema = std::make_unique<optim::ModelEma>(run.averaged, c.ema_decay);
  if (!resumed) return;  // the folder is made fresh once every rank has agreed (train_job)
  const checkpoint::LoadedCheckpoint& r = *resumed;
  run.model->load_state_dict(r.weights);
  run.opt->load_state(r.optimizer);
  if (run.ema) {
    VIT_CHECK(r.ema.size() == run.averaged.size(), "train", "{}: EMA weights missing from the checkpoint",
              run.files.last);
    for (size_t i = 0; i < run.averaged.size(); ++i) run.ema->averages()[i].second.copy_(r.ema[i].second);
  }
  run.start_epoch = r.info.epoch;
  run.step = r.info.step;
  run.first_batch = r.info.batch;
  if (run.first_batch > 0) run.carried = EpochStats::from_json(r.info.epoch_stats_json, run.files.last);
  run.elapsed_before = r.info.elapsed_seconds;
  if (run.lead()) truncate_metrics(run.files.metrics, run.start_epoch);
}

// "2 threads", or "4 ranks x 2 threads (batch 32 per rank)" under mpirun.
std::string workers_str(const Run& run) {
  if (!run.comm.distributed()) return fmt::format("{} threads", run.threads);
  return fmt::format("{} ranks x {} threads, ~{} images per rank", run.comm.size(), run.threads,
                     run.config.batch_size / run.comm.size());
}

}  // namespace

void plan(Run& run) {
  TrainConfig& c = run.config;
  run.steps_per_epoch = static_cast<int64_t>(
      data::plan_epoch(run.data.train, c.batch_size, true, true, c.seed, 0, run.comm.size()).batches.size());
  if (c.steps > 0) set_steps(run, c.steps);
  run.total_steps = c.steps > 0 ? c.steps : run.steps_per_epoch * c.epochs;
  run.warmup_steps = static_cast<int64_t>(std::llround(c.warmup_epochs * static_cast<double>(run.steps_per_epoch)));
  const model::ComputeCost cost = model::macs_per_image(c.model);
  std::printf("model %s: %ld parameters, %.2f MMACs per image; %ld training / %ld %s images from %s\n",
              c.model.name.c_str(), run.model->num_parameters(), static_cast<double>(cost.total()) / 1e6,
              run.data.train.size(), run.data.test.size(), c.val_split > 0 ? "validation" : "test", c.data_dir.c_str());
  if (c.steps > 0) {
    std::printf("training %ld steps = %.2f epochs of %ld steps (batch %ld, %s lr %g, %s) -> %s\n", c.steps,
                static_cast<double>(c.steps) / static_cast<double>(run.steps_per_epoch), run.steps_per_epoch,
                c.batch_size, c.optimizer.c_str(), c.lr, workers_str(run).c_str(), c.out_dir.c_str());
  } else if (c.time_budget <= 0) {
    std::printf("training %ld epochs x %ld steps (batch %ld, %s lr %g, %s) -> %s\n", c.epochs, run.steps_per_epoch,
                c.batch_size, c.optimizer.c_str(), c.lr, workers_str(run).c_str(), c.out_dir.c_str());
  }
  if (infer::parse_precision(c.precision) == infer::Precision::BF16) {
    const bool native = kernels::bf16_gemm_native();
    std::printf(
        "mixed precision: bf16 inputs, float32 accumulation for the Linear and convolution GEMMs (%s); float32 "
        "weights, AdamW state, LayerNorm, softmax and loss\n",
        kernels::bf16_gemm_path());
    if (!native && run.lead()) {
      const bool avx2 = std::string(kernels::bf16_gemm_path()) == "AVX2 float32";
      std::fprintf(stderr,
                   "note: no AVX512_BF16 here (the CPU lacks it, or VIT_ISA caps the kernels below AVX-512): "
                   "--precision bf16 trains with %s (the same bfloat16 rounding, float32 sums in another order: close "
                   "to AVX512_BF16, not bit for bit; %s)\n",
                   avx2 ? "float32 AVX2 arithmetic on the bfloat16 values" : "a plain C++ emulation",
                   avx2 ? "about fp32's speed" : "much slower than fp32");
    }
  }
  for (const std::string& note : c.init_notes) std::printf("fine-tuning: %s\n", note.c_str());
  std::vector<std::string> groups;
  if (c.freeze != "none") groups.push_back("backbone frozen (a linear probe: only the head trains)");
  if (c.layer_decay < 1.0) {
    groups.push_back(fmt::format("layer decay {} (block i at lr x {}^(depth - i), the embeddings at lr x {:.3g})",
                                 c.layer_decay, c.layer_decay,
                                 std::pow(c.layer_decay, static_cast<double>(c.model.depth + 1))));
  }
  if (c.head_lr > 0) groups.push_back(fmt::format("the head at peak lr {}", c.head_lr));
  if (!groups.empty()) std::printf("fine-tuning: %s\n", fmt::format("{}", fmt::join(groups, "; ")).c_str());
  if (run.resumed) std::printf("resumed from %s at epoch %ld\n", run.files.last.c_str(), run.start_epoch);
  std::fflush(stdout);
  // Milestones (and the best accuracy) already passed before a resume.
  for (double t : c.milestones) run.result.milestones.emplace_back(t, -1.0);
  for (const auto& row : read_metrics(run.files.metrics)) {
    const double acc = metric(row, "test_acc");
    if (acc > run.result.best_test_accuracy || (run.best_epoch == 0 && std::isfinite(acc))) {
      run.result.best_test_accuracy = acc;
      run.best_epoch = static_cast<int64_t>(metric(row, "epoch"));
    }
    for (auto& [t, at] : run.result.milestones) {
      if (at < 0 && acc >= t) at = metric(row, "elapsed");
    }
  }
  if (!fs::exists(run.files.best))
    run.best_epoch = 0;  // none written (before vit wrote one every run): the next epoch's
}

Run start_or_resume(TrainConfig config) {
  // Fine-tuning: the model is the file's (read before anything is checked against it).
  std::optional<InitSource> init;
  if (!config.resume && !config.init.empty()) init = read_init(config);
  if (!config.resume) config.validate();
  if (config.threads > 0) kernels::set_num_threads(config.threads);  // 0: as the process is set
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
    run.files.refuse_inputs(
        {{"the --init file", config.resume ? "" : config.init}, {"the --teacher file", config.teacher}});
    if (!config.resume) run.files.refuse_to_replace(config.overwrite);
  }
  std::optional<checkpoint::LoadedCheckpoint> resumed;  // setup's alone: its weights are freed once copied
  if (config.resume) {
    VIT_CHECK(fs::exists(run.files.last), "train", "--resume {}: no checkpoint {} to resume from", config.out_dir,
              run.files.last);
    resumed = checkpoint::load_checkpoint(run.files.last);
    run.resumed = true;
    VIT_CHECK(resumed->scales.empty(), "train",
              "--resume {}: {} is an int8 model (vit quantize), for inference only; resume from its float checkpoint",
              config.out_dir, run.files.last);
    run.config = resume_config(config, *resumed, run.files.last);
    const bool data_given = config.flag_given("--data");
    VIT_CHECK(data_given || fs::exists(run.config.data_dir), "train",
              "--resume {}: the run's data {} is not there any more; if it moved, give its new place with --data",
              config.out_dir, run.config.data_dir);
    check_fits(run.config);
  }
  load_data(run, resumed ? &*resumed : nullptr, init ? &*init : nullptr);
  if (init) run.config.model.validate();
  build_model(run, resumed ? &*resumed : nullptr, init ? &*init : nullptr);
  if (!run.config.teacher.empty()) {
    run.teacher = std::make_unique<Teacher>(run.config.teacher, run.config.model, run.data.train.class_names,
                                            run.config.teacher_heads);
    const infer::LoadedModel& t = run.teacher->loaded();
    const std::vector<int64_t>& columns = run.teacher->columns();
    bool reordered = t.model->config().num_classes != run.config.model.num_classes;
    for (size_t k = 0; k < columns.size(); ++k) reordered = reordered || columns[k] != static_cast<int64_t>(k);
    if (reordered)
      std::printf("--teacher %s: its classes matched to the student's by name\n", run.config.teacher.c_str());
    // The teacher sees the student's input: warn when it was trained on other statistics.
    if (t.preprocess.mean != run.data.norm.mean || t.preprocess.std != run.data.norm.std) {
      std::fprintf(stderr,
                   "warning: --teacher %s expects inputs normalised with mean [%s] std [%s]; it is given the student's "
                   "(mean [%s] std [%s])\n",
                   run.config.teacher.c_str(), fmt::format("{}", fmt::join(t.preprocess.mean, ", ")).c_str(),
                   fmt::format("{}", fmt::join(t.preprocess.std, ", ")).c_str(),
                   fmt::format("{}", fmt::join(run.data.norm.mean, ", ")).c_str(),
                   fmt::format("{}", fmt::join(run.data.norm.std, ", ")).c_str());
    }
  }
  // Everything a checkpoint records, encoded once before the first step: a save can then fail
  // for want of disk space, never over what it records after hours of training.
  (void)checkpoint::checkpoint_metadata(run.files.last, checkpoint_info(run, run.start_epoch, 0, "{}"),
                                        run.config.optimizer);
  run.bar = run.config.progress == 1 || (run.config.progress < 0 && ::isatty(STDOUT_FILENO));
  return run;
}

}  // namespace vit::train
