// `vit train`: flags (or a preset) into a TrainConfig, then train::train.
#include <omp.h>

#include <filesystem>
#include <functional>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/validators.h"
#include "kernels/gemm.h"
#include "train/trainer.h"

namespace vit::cli {

void set_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  kernels::set_blas_threads(threads);
}

void add_train_command(CLI::App& app, std::function<void(train::TrainConfig&)> run) {
  auto c = std::make_shared<train::TrainConfig>(train::fashion_recipe());
  auto budget = std::make_shared<std::string>();
  auto preset = std::make_shared<std::string>();
  auto no_augment = std::make_shared<bool>(false);
  auto plain = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "train",
      "train a ViT (default: Fashion-MNIST from data/fashion-mnist, vit_fashion preset, a 10-minute budget tuned for 2 "
      "CPU cores; --preset vit_digits --data data/mnist: the bundled digits)");
  auto* data = cmd->add_option("--data", c->data_dir,
                               "dataset directory: MNIST IDX files, CIFAR-10 batches, or train/ and test/ "
                               "image folders")
                   ->capture_default_str();
  auto* mean = cmd->add_option("--mean", c->normalization.mean,
                               "per-channel normalisation mean (default: the recipe's for its own data, else computed "
                               "from the training images)");
  auto* std = cmd->add_option("--std", c->normalization.std, "per-channel normalisation std (with --mean)");
  mean->needs(std);
  std->needs(mean);
  cmd->add_option("--preset", *preset, "model preset: vit_digits, vit_cifar, vit_tiny_patch16_224, ...");
  auto model_flags = std::make_shared<ModelFlags>(*cmd);  // override the preset's values
  auto* epochs = cmd->add_option("--epochs", c->epochs,
                                 "epochs instead of the recipe's time budget (with --resume: extend the run to this "
                                 "many)");
  auto* time_budget = cmd->add_option("--time-budget", *budget,
                                      "train for this long, evaluation included: 600, 10m, 1h, 1h30m (the schedule is "
                                      "sized to it from the measured speed; default: the recipe's, 10m for "
                                      "vit_fashion)");
  auto* steps = cmd->add_option("--steps", c->steps,
                                "train exactly this many steps (a budgeted run prints its number: rerun it exactly)");
  time_budget->excludes(epochs);
  steps->excludes(epochs);
  steps->excludes(time_budget);
  cmd->add_option("--val-split", c->val_split,
                  "hold out this many training images (a fixed draw) and evaluate on them instead of the test set "
                  "(for tuning a recipe; the test set is not evaluated)")
      ->capture_default_str();
  cmd->add_option("--batch-size", c->batch_size, "batch size")->capture_default_str();
  cmd->add_option("--optimizer", c->optimizer, "adamw or sgd")->capture_default_str();
  cmd->add_option("--lr", c->lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", c->min_lr, "final learning rate of the cosine decay")->capture_default_str();
  cmd->add_option("--warmup-epochs", c->warmup_epochs, "linear warmup length")->capture_default_str();
  cmd->add_option("--weight-decay", c->weight_decay,
                  "decoupled weight decay (not on biases, norms, cls_token, "
                  "pos_embed)")
      ->capture_default_str();
  cmd->add_option("--momentum", c->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--label-smoothing", c->label_smoothing, "label smoothing")->capture_default_str();
  cmd->add_option("--clip-grad", c->clip_grad, "global gradient-norm clip (0: off)")->capture_default_str();
  cmd->add_option("--ema", c->ema_decay, "weight EMA decay (0: off)")->capture_default_str();
  std::vector<CLI::Option*> augment_flags;
  augment_flags.push_back(cmd->add_option("--rotate", c->augment.rotate_degrees, "augmentation: max rotation (degrees)")
                              ->capture_default_str());
  augment_flags.push_back(cmd->add_option("--translate", c->augment.translate, "augmentation: max shift (fraction)")
                              ->capture_default_str());
  augment_flags.push_back(
      cmd->add_option("--scale-min", c->augment.scale_min, "augmentation: min zoom")->capture_default_str());
  augment_flags.push_back(
      cmd->add_option("--scale-max", c->augment.scale_max, "augmentation: max zoom")->capture_default_str());
  augment_flags.push_back(
      cmd->add_option("--crop-padding", c->augment.crop_padding, "augmentation: random crop padding")
          ->capture_default_str());
  augment_flags.push_back(cmd->add_flag("--hflip", c->augment.hflip, "augmentation: random horizontal flips"));
  augment_flags.push_back(
      cmd->add_option("--mixup", c->augment.mixup_alpha, "mixup alpha (0: off)")->capture_default_str());
  augment_flags.push_back(
      cmd->add_option("--cutmix", c->augment.cutmix_alpha, "cutmix alpha (0: off)")->capture_default_str());
  augment_flags.push_back(
      cmd->add_option("--erase", c->augment.erase_prob, "random erasing: share of images given a box of noise (0: off)")
          ->capture_default_str());
  CLI::Option* no_augment_flag = cmd->add_flag("--no-augment", *no_augment, "turn all augmentation off");
  for (CLI::Option* flag : augment_flags) no_augment_flag->excludes(flag);  // not silently overridden
  cmd->add_option("--teacher", c->teacher,
                  "DeiT distillation: a teacher checkpoint (any layout vit loads) whose predictions the student's "
                  "distillation head learns (the student needs --dist-token or a deit_*_distilled preset)");
  cmd->add_option("--distillation", c->distillation, "with --teacher: hard (the teacher's top class) or soft (KL)")
      ->capture_default_str()
      ->check(CLI::IsMember({"hard", "soft"}));
  cmd->add_option("--distill-alpha", c->distill_alpha, "with --teacher: weight of the distillation head's loss")
      ->capture_default_str();
  cmd->add_option("--distill-tau", c->distill_tau, "with --distillation soft: temperature")->capture_default_str();
  cmd->add_option("--seed", c->seed, "random seed")->capture_default_str()->check(kSeed);
  cmd->add_option("--threads", c->threads, "threads (0: all cores)")->capture_default_str()->check(kThreads);
  auto* out = cmd->add_option("--out", c->out_dir, "output directory (checkpoints, metrics.jsonl, report.html)")
                  ->capture_default_str();
  auto resume_dir = std::make_shared<std::string>();
  auto* resume = cmd->add_option("--resume", *resume_dir,
                                 "continue the run in this directory from its last checkpoint (may change: --data with "
                                 "the same data, --epochs to extend, --threads, --checkpoint-every)");
  cmd->add_flag("--overwrite", c->overwrite,
                "replace the run already in --out (without it, a folder holding a run is refused)");
  cmd->add_option("--checkpoint-every", c->checkpoint_every,
                  "also save last.safetensors every N steps, mid-epoch (0: at epoch ends only; Ctrl-C always saves)")
      ->capture_default_str();
  cmd->add_option("--max-pixels", c->max_pixels, "image folders: refuse images with more pixels (decompression bombs)")
      ->capture_default_str();
  cmd->add_option("--comm-timeout", c->comm_timeout,
                  "under mpirun: seconds a rank waits for the others without progress before stopping the job (a "
                  "lost rank or host)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_flag("--skip-nonfinite", c->skip_nonfinite,
                "skip steps with a NaN/Inf loss or gradient instead of stopping");
  cmd->add_flag("--plain", *plain, "plain log lines even on a terminal");
  cmd->callback([=] {
    // A preset brings its own recipe (vit_digits the digits'); the flags given apply on top of it.
    const std::string name = preset->empty() ? "vit_fashion" : *preset;
    const train::TrainConfig recipe = train::recipe_for(name);
    if (!preset->empty() && name != "vit_fashion") {
      *c = recipe;
      for (CLI::Option* option : cmd->get_options()) {
        if (option->count() > 0) option->run_callback();
      }
    }
    if (time_budget->count() > 0) c->time_budget = train::parse_duration(*budget, "--time-budget");
    VIT_CHECK(steps->count() == 0 || c->steps >= 1, "train", "--steps must be >= 1, got {}", c->steps);
    if (epochs->count() > 0 || steps->count() > 0) c->time_budget = 0;  // a length given replaces the budget
    c->model = model_flags->config(name, !preset->empty());
    c->model_explicit = !preset->empty() || model_flags->given();
    if (*no_augment) c->augment = {};
    if (*plain) c->progress = 0;
    // The recipe's normalisation belongs to its own data: other data gets its own statistics.
    if (data->count() > 0 && mean->count() == 0 && c->data_dir != recipe.data_dir) {
      c->normalization = {};
    }
    c->resume = resume->count() > 0;
    if (c->resume && epochs->count() == 0) c->epochs = 0;  // continue the checkpoint's schedule
    // What was given explicitly: on resume each flag must be one a resumed run takes, or agree.
    // The model's flags are not listed: model_explicit and the model they make say it all.
    c->given_flags.clear();
    for (const CLI::Option* option : cmd->get_options()) {
      if (option->count() > 0 && !model_flags->contains(option) && option->get_name() != "--preset") {
        c->given_flags.push_back(option->get_name());
      }
    }
    c->given_model_fields = model_flags->given_fields();
    if (!preset->empty()) c->given_model_fields = {"*"};
    if (c->resume) {
      std::error_code e1, e2;
      VIT_CHECK(out->count() == 0 || std::filesystem::weakly_canonical(c->out_dir, e1) ==
                                         std::filesystem::weakly_canonical(*resume_dir, e2),
                "train",
                "--out {} with --resume {}: a resumed run continues in its own folder (to continue a copy "
                "elsewhere, copy the folder and resume the copy)",
                c->out_dir, *resume_dir);
      c->out_dir = *resume_dir;
    }
    if (run) {
      run(*c);
    } else {
      train::train(*c);
    }
  });
}

}  // namespace vit::cli
