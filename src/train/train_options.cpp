// The training options, declared once, and the rules that turn them into a TrainConfig (see
// train_options.h).
#include "train/train_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <type_traits>

#include "core/check.h"
#include "core/parse.h"
#include "data/auto_augment.h"
#include "model/model_options.h"

namespace vit::train {

namespace {

constexpr int kMaxThreads = 1024;
const char* kOp = "train";
using Values = std::vector<std::string>;
using Arity = TrainOption::Arity;

// The one value of an option (lists take several, flags true/false).
const std::string& one(const Values& values, const std::string& what) {
  VIT_CHECK(values.size() == 1, kOp, "{}: takes one value, got {}", what, values.size());
  return values[0];
}

// Setters by field type: the option's text parsed into the field.
template <typename T>
std::function<void(TrainConfig&, const Values&, const std::string&)> into(T TrainConfig::*field) {
  return [field](TrainConfig& c, const Values& v, const std::string& what) {
    if constexpr (std::is_same_v<T, bool>) {
      c.*field = v.empty() || parse_bool(one(v, what), kOp, what);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      c.*field = parse_uint64(one(v, what), kOp, what);
    } else if constexpr (std::is_integral_v<T>) {
      c.*field = parse_int(one(v, what), kOp, what);
    } else if constexpr (std::is_floating_point_v<T>) {
      c.*field = parse_number(one(v, what), kOp, what);
    } else {
      c.*field = one(v, what);
    }
  };
}

template <typename T>
std::function<void(TrainConfig&, const Values&, const std::string&)> augment(T data::AugmentConfig::*field) {
  return [field](TrainConfig& c, const Values& v, const std::string& what) {
    if constexpr (std::is_same_v<T, bool>) {
      c.augment.*field = v.empty() || parse_bool(one(v, what), kOp, what);
    } else if constexpr (std::is_integral_v<T>) {
      c.augment.*field = parse_int(one(v, what), kOp, what);
    } else {
      c.augment.*field = parse_number(one(v, what), kOp, what);
    }
  };
}

std::function<void(TrainConfig&, const Values&, const std::string&)> numbers(
    std::vector<double> data::Normalization::*field) {
  return [field](TrainConfig& c, const Values& v, const std::string& what) {
    VIT_CHECK(!v.empty(), kOp, "{}: needs a value per channel (or one for all)", what);
    std::vector<double> out;
    for (const std::string& text : v) out.push_back(parse_number(text, kOp, what));
    c.normalization.*field = out;
  };
}

// The type --help shows.
std::string type_of(const std::string& name, Arity arity) {
  if (arity == Arity::Flag) return "";
  for (const char* n : {"data", "preset", "optimizer", "teacher", "distillation", "out", "resume", "precision", "tta",
                        "init", "freeze", "data_residency"}) {
    if (name == n) return "TEXT";
  }
  for (const char* n : {"epochs", "steps", "val_split", "batch_size", "crop_padding", "seed", "threads",
                        "checkpoint_every", "max_pixels", "teacher_heads", "loader_threads"}) {
    if (name == n) return "INT";
  }
  if (name == "time_budget") return "DURATION";
  return arity == Arity::List ? "FLOAT ..." : "FLOAT";
}

std::vector<TrainOption> make_table() {
  const TrainConfig d = fashion_recipe();  // the defaults --help shows: the main job's
  auto num = [](double v) { return number_str(v); };
  std::vector<TrainOption> t;
  auto add = [&](const char* name, Arity arity, const char* help, std::string shown,
                 std::function<void(TrainConfig&, const Values&, const std::string&)> set = {}) {
    t.push_back({name, arity, help, std::move(shown), type_of(name, arity), std::move(set)});
  };
  add("data", Arity::One, "dataset directory: MNIST IDX files, CIFAR-10 batches, or train/ and test/ image folders",
      d.data_dir, into(&TrainConfig::data_dir));
  add("mean", Arity::List,
      "per-channel normalisation mean (default: the recipe's for its own data, else computed from the training "
      "images)",
      "", numbers(&data::Normalization::mean));
  add("std", Arity::List, "per-channel normalisation std (with --mean)", "", numbers(&data::Normalization::std));
  add("preset", Arity::One,
      "model preset: vit_hybrid_fashion (default), vit_fashion, vit_digits, vit_cifar, vit_tiny_patch16_224, ...", "");
  add("init", Arity::One,
      "fine-tune: start from this model file (any layout vit loads: its shape, weights and normalisation; the head "
      "kept where its classes cover the data's, else a fresh zero head; --image-size resamples the position "
      "embedding, grey/RGB input convolutions adapted; recipe: lr 1e-4, warmup 1 epoch, 10 epochs, batch 64)",
      "", into(&TrainConfig::init));
  add("new_head", Arity::Flag, "with --init: a fresh head for the data's classes even where the file's cover them", "",
      into(&TrainConfig::new_head));
  add("keep_head", Arity::Flag,
      "with --init: keep a head whose classes have no names (a foreign file's), the data's classes 0..K-1 taken as "
      "its rows 0..K-1 (default: a fresh head, since its rows mean nothing to the data)",
      "", into(&TrainConfig::keep_head));
  add("layer_decay", Arity::One,
      "layer-wise learning-rate decay (BEiT/MAE fine-tuning, e.g. 0.65): block i trains at lr x decay^(depth - i), "
      "the embeddings at decay^(depth + 1), the head and final norm at lr (1: off)",
      "1", into(&TrainConfig::layer_decay));
  add("head_lr", Arity::One, "the head's own peak learning rate, on the same schedule (0: --lr)", "0",
      into(&TrainConfig::head_lr));
  add("freeze", Arity::One,
      "none, or backbone (with --init: a linear probe; only the head trains and the backbone runs forward only)",
      "none", [](TrainConfig& c, const Values& v, const std::string& what) {
        c.freeze = parse_choice(one(v, what), kOp, what, {"none", "backbone"});
      });
  add("epochs", Arity::One, "epochs instead of the recipe's time budget (with --resume: extend the run to this many)",
      "", into(&TrainConfig::epochs));
  add("time_budget", Arity::One,
      "train for this long, evaluation included: 600, 10m, 1h, 1h30m (the schedule is sized to it from the measured "
      "speed; default: the recipe's, 10m for the Fashion-MNIST presets)",
      "");
  add("steps", Arity::One, "train exactly this many steps (a budgeted run prints its number: rerun it exactly)", "",
      [](TrainConfig& c, const Values& v, const std::string& what) {
        c.steps = parse_int(one(v, what), kOp, what);
        VIT_CHECK(c.steps >= 1, kOp, "{} must be >= 1, got {}", what, c.steps);
      });
  add("val_split", Arity::One,
      "hold out this many training images (a fixed draw) and evaluate on them instead of the test set (for tuning a "
      "recipe; the test set is not evaluated)",
      std::to_string(d.val_split), into(&TrainConfig::val_split));
  add("batch_size", Arity::One, "batch size", std::to_string(d.batch_size), into(&TrainConfig::batch_size));
  add("optimizer", Arity::One, "adamw or sgd", d.optimizer,
      [](TrainConfig& c, const Values& v, const std::string& what) {
        c.optimizer = parse_choice(one(v, what), kOp, what, {"adamw", "sgd"});
      });
  add("lr", Arity::One, "peak learning rate", num(d.lr), into(&TrainConfig::lr));
  add("min_lr", Arity::One, "final learning rate of the cosine decay", num(d.min_lr), into(&TrainConfig::min_lr));
  add("warmup_epochs", Arity::One, "linear warmup length", num(d.warmup_epochs), into(&TrainConfig::warmup_epochs));
  add("weight_decay", Arity::One, "decoupled weight decay (not on biases, norms, cls_token, dist_token, pos_embed)",
      num(d.weight_decay), into(&TrainConfig::weight_decay));
  add("momentum", Arity::One, "SGD momentum", num(d.momentum), into(&TrainConfig::momentum));
  add("label_smoothing", Arity::One, "label smoothing", num(d.label_smoothing), into(&TrainConfig::label_smoothing));
  add("clip_grad", Arity::One, "global gradient-norm clip (0: off)", num(d.clip_grad), into(&TrainConfig::clip_grad));
  add("ema", Arity::One, "weight EMA decay (0: off)", num(d.ema_decay), into(&TrainConfig::ema_decay));
  add("rotate", Arity::One, "augmentation: max rotation (degrees)", num(d.augment.rotate_degrees),
      augment(&data::AugmentConfig::rotate_degrees));
  add("translate", Arity::One, "augmentation: max shift (fraction)", num(d.augment.translate),
      augment(&data::AugmentConfig::translate));
  add("scale_min", Arity::One, "augmentation: min zoom", num(d.augment.scale_min),
      augment(&data::AugmentConfig::scale_min));
  add("scale_max", Arity::One, "augmentation: max zoom", num(d.augment.scale_max),
      augment(&data::AugmentConfig::scale_max));
  add("crop_padding", Arity::One, "augmentation: random crop padding", std::to_string(d.augment.crop_padding),
      augment(&data::AugmentConfig::crop_padding));
  add("hflip", Arity::Flag, "augmentation: random horizontal flips", d.augment.hflip ? "true" : "false",
      augment(&data::AugmentConfig::hflip));
  add("mixup", Arity::One, "mixup alpha (0: off)", num(d.augment.mixup_alpha),
      augment(&data::AugmentConfig::mixup_alpha));
  add("cutmix", Arity::One, "cutmix alpha (0: off)", num(d.augment.cutmix_alpha),
      augment(&data::AugmentConfig::cutmix_alpha));
  add("erase", Arity::One, "random erasing: share of images given a box of noise (0: off)", num(d.augment.erase_prob),
      augment(&data::AugmentConfig::erase_prob));
  add("rrc_scale", Arity::One,
      "random resized crop (timm's RandomResizedCrop, before the other augmentations): a box of this share to all of "
      "the image's area, aspect 3/4 to 4/3, resized to the model's size; from the original photo when the folder is "
      "streamed (0: off; timm's 0.08)",
      num(d.augment.rrc_scale), augment(&data::AugmentConfig::rrc_scale));
  add("auto_augment", Arity::One,
      "automatic augmentation after the crop and flip: ta_wide (torchvision's TrivialAugmentWide) or rand-mM-nN "
      "(RandAugment: N operations at magnitude M of 0-30; rand = rand-m9-n2); none: off",
      d.augment.auto_augment.empty() ? "none" : d.augment.auto_augment,
      [](TrainConfig& c, const Values& v, const std::string& what) {
        const std::string& text = one(v, what);
        (void)data::parse_auto_augment(text, what);  // refused here, naming the flag
        c.augment.auto_augment = text == "none" ? "" : text;
      });
  add("no_augment", Arity::Flag, "turn all augmentation off", "");
  add("teacher", Arity::One,
      "DeiT distillation: a teacher checkpoint (any layout vit loads) whose predictions the student's distillation "
      "head learns (the student needs --dist-token or a deit_*_distilled preset)",
      "", into(&TrainConfig::teacher));
  add("teacher_heads", Arity::One,
      "with --teacher: the teacher's attention heads, for a teacher of non-standard width without them in its file "
      "(default: from the file, else standard for its width)",
      "", into(&TrainConfig::teacher_heads));
  add("distillation", Arity::One, "with --teacher: hard (the teacher's top class) or soft (KL)", d.distillation,
      [](TrainConfig& c, const Values& v, const std::string& what) {
        c.distillation = parse_choice(one(v, what), kOp, what, {"hard", "soft"});
      });
  add("distill_alpha", Arity::One, "with --teacher: weight of the distillation head's loss", num(d.distill_alpha),
      into(&TrainConfig::distill_alpha));
  add("distill_tau", Arity::One, "with --distillation soft: temperature", num(d.distill_tau),
      into(&TrainConfig::distill_tau));
  add("precision", Arity::One,
      "fp32, or bf16: mixed precision as PyTorch's CPU autocast (the Linear and convolution GEMMs take bfloat16 "
      "inputs with float32 accumulation, AVX512_BF16 where the CPU has it; weights, AdamW state, LayerNorm, softmax "
      "and loss stay float32, and so does the checkpoint)",
      d.precision, [](TrainConfig& c, const Values& v, const std::string& what) {
        c.precision = parse_choice(one(v, what), kOp, what, {"fp32", "bf16"});
      });
  add("tta", Arity::One,
      "none, or flip: at the end, also evaluate each test image averaged with its horizontal mirror and print it "
      "beside the plain single-view accuracy (which stays the run's result)",
      d.tta, [](TrainConfig& c, const Values& v, const std::string& what) {
        c.tta = parse_choice(one(v, what), kOp, what, {"none", "flip"});
      });
  add("seed", Arity::One, "random seed", std::to_string(d.seed), into(&TrainConfig::seed));
  add("threads", Arity::One, "threads (0: all cores)", "0",
      [](TrainConfig& c, const Values& v, const std::string& what) {
        const std::string& text = one(v, what);
        const double n = parse_number(text, kOp, what);
        VIT_CHECK(n >= 0 && n <= kMaxThreads && n == static_cast<double>(static_cast<int>(n)), kOp,
                  "{}: must be 0 (all {} cores) or a thread count up to {}, got {}", what,
                  std::thread::hardware_concurrency(), kMaxThreads, text);
        c.threads = static_cast<int>(n);
      });
  add("out", Arity::One, "output directory (checkpoints, metrics.jsonl, report.html)", d.out_dir,
      into(&TrainConfig::out_dir));
  add("resume", Arity::One,
      "continue the run in this directory from its last checkpoint (may change: --data with the same data, --epochs "
      "to extend, --threads, --checkpoint-every)",
      "");
  add("overwrite", Arity::Flag, "replace the run already in --out (without it, a folder holding a run is refused)", "",
      into(&TrainConfig::overwrite));
  add("checkpoint_every", Arity::One,
      "also save last.safetensors every N steps, mid-epoch (0: at epoch ends only; Ctrl-C always saves)",
      std::to_string(d.checkpoint_every), into(&TrainConfig::checkpoint_every));
  add("max_pixels", Arity::One, "image folders: refuse images with more pixels (decompression bombs)",
      std::to_string(d.max_pixels), into(&TrainConfig::max_pixels));
  add("data_residency", Arity::One, data::kResidencyHelp, d.data_residency, into(&TrainConfig::data_residency));
  add("loader_threads", Arity::One, data::kLoaderThreadsHelp, std::to_string(d.loader_threads),
      into(&TrainConfig::loader_threads));
  add("comm_timeout", Arity::One,
      "under mpirun: seconds a rank waits for the others without progress before stopping the job (a lost rank or "
      "host)",
      num(d.comm_timeout), [](TrainConfig& c, const Values& v, const std::string& what) {
        c.comm_timeout = parse_number(one(v, what), kOp, what, 1.0, 86400.0);
      });
  add("skip_nonfinite", Arity::Flag, "skip steps with a NaN/Inf loss or gradient instead of stopping", "",
      into(&TrainConfig::skip_nonfinite));
  add("plain", Arity::Flag, "plain log lines even on a terminal", "");
  return t;
}

const TrainOption* find_option(const std::string& name) {
  for (const TrainOption& o : train_options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// Options that cannot go together: "[train] --time-budget excludes --epochs".
void exclude(const TrainArgs& args, const std::string& a, const std::string& b) {
  VIT_CHECK(!(args.has(a) && args.has(b)), kOp, "{} excludes {}", args.what(a), args.what(b));
}

}  // namespace

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

TrainConfig make_train_config(const TrainArgs& args) {
  // Every name is an option of the table or of the model.
  for (const TrainArgs::Given& g : args.given) {
    VIT_CHECK(find_option(g.name) != nullptr || model::find_model_option(g.name) != nullptr, kOp,
              "unknown option {} (`vit train --help` lists them)", args.what(g.name));
  }
  exclude(args, "time_budget", "epochs");
  exclude(args, "steps", "epochs");
  exclude(args, "steps", "time_budget");
  for (const char* a : {"rotate", "translate", "scale_min", "scale_max", "crop_padding", "hflip", "mixup", "cutmix",
                        "erase", "rrc_scale", "auto_augment"}) {
    exclude(args, a, "no_augment");  // augmentation asked for and turned off: not silently overridden
  }
  VIT_CHECK(args.has("mean") == args.has("std"), kOp, "{} needs {}", args.what(args.has("mean") ? "mean" : "std"),
            args.what(args.has("mean") ? "std" : "mean"));

  // Fine-tuning: the model is the --init file's; the fine-tuning recipe, on the data given.
  const bool init_given = args.has("init");
  if (init_given) {
    VIT_CHECK(!one(args.values("init"), args.what("init")).empty(), kOp, "{}: give the model file to fine-tune",
              args.what("init"));
    exclude(args, "init", "resume");
    exclude(args, "init", "preset");
    VIT_CHECK(args.has("data"), kOp, "{} needs {} DIR: the labelled images to fine-tune on", args.what("init"),
              args.what("data"));
  }
  exclude(args, "new_head", "keep_head");
  // (With --resume they are the run's to match: a fine-tuning run resumes with its own, others refuse them.)
  for (const char* o : {"new_head", "keep_head", "freeze"}) {
    VIT_CHECK(init_given || args.has("resume") || !args.has(o), kOp,
              "{} applies to fine-tuning: give the model to start from with {}", args.what(o), args.what("init"));
  }
  // A preset brings its own recipe (vit_digits the digits'); the options given apply over it.
  const bool preset_given = args.has("preset");
  const std::string name = preset_given ? one(args.values("preset"), args.what("preset")) : "vit_hybrid_fashion";
  VIT_CHECK(!name.empty(), kOp, "{}: must not be empty", args.what("preset"));
  const TrainConfig recipe = init_given ? finetune_recipe() : recipe_for(name);
  TrainConfig c = recipe;
  for (const TrainOption& o : train_options()) {
    if (o.set && args.has(o.name)) o.set(c, args.values(o.name), args.what(o.name));
  }
  if (args.has("time_budget")) {
    c.time_budget = parse_duration(one(args.values("time_budget"), args.what("time_budget")), args.what("time_budget"));
  }
  if (args.has("epochs") || args.has("steps")) c.time_budget = 0;  // a length given replaces the budget
  auto flag_set = [&](const char* option) {
    return args.has(option) &&
           parse_bool(args.values(option).empty() ? "true" : one(args.values(option), args.what(option)), kOp,
                      args.what(option));
  };
  if (flag_set("no_augment")) c.augment = {};
  if (flag_set("plain")) c.progress = 0;

  // The model: the preset's, with the model options given over it ("custom" without a preset).
  // Fine-tuning: the file's, read when the run starts; the options given are kept to adapt it.
  c.model = init_given ? model::ViTConfig{} : model::preset(name);
  c.given_model_fields.clear();
  for (const TrainArgs::Given& g : args.given) {
    bool negated = false;
    const model::ModelOption* o = model::find_model_option(g.name, &negated);
    if (o == nullptr) continue;
    const std::string what = args.what(g.name);
    if (o->toggle) {
      const bool on = g.values.empty() || parse_bool(one(g.values, what), kOp, what);
      o->set(c.model, on != negated ? "true" : "false", what);
    } else {
      o->set(c.model, one(g.values, what), what);
    }
    if (!c.model_field_given(o->key)) c.given_model_fields.push_back(o->key);
  }
  // --conv-stages 0 over a hybrid (the main job's model) makes it a plain ViT: the backbone's other
  // fields, where not given, go with it.
  if (c.model_field_given("conv_stages") && c.model.conv_stages == 0) {
    const model::ViTConfig plain;
    if (!c.model_field_given("conv_channels")) c.model.conv_channels = plain.conv_channels;
    if (!c.model_field_given("conv_blocks")) c.model.conv_blocks = plain.conv_blocks;
    if (!c.model_field_given("conv_stem_stride")) c.model.conv_stem_stride = plain.conv_stem_stride;
  }
  c.num_classes_given = c.model_field_given("num_classes");
  const bool model_given = !c.given_model_fields.empty();
  if (model_given && !preset_given && !init_given) c.model.name = "custom";
  c.model_explicit = preset_given || model_given;
  if (preset_given) c.given_model_fields = {"*"};

  // The recipe's normalisation belongs to its own data: other data gets its own statistics.
  if (args.has("data") && !args.has("mean") && c.data_dir != recipe.data_dir) c.normalization = {};

  // What was given explicitly: on resume each option must be one a resumed run takes, or agree.
  // The model's options are not listed: model_explicit and the model they make say it all.
  c.given_flags.clear();
  for (const TrainOption& o : train_options()) {
    if (args.has(o.name) && o.name != "preset") c.given_flags.push_back(flag_of(o.name));
  }
  c.resume = args.has("resume");
  if (c.resume) {
    const std::string& dir = one(args.values("resume"), args.what("resume"));
    VIT_CHECK(!dir.empty(), kOp, "{}: give the run's folder", args.what("resume"));
    if (!args.has("epochs")) c.epochs = 0;  // continue the checkpoint's schedule
    std::error_code e1, e2;
    VIT_CHECK(!args.has("out") ||
                  std::filesystem::weakly_canonical(c.out_dir, e1) == std::filesystem::weakly_canonical(dir, e2),
              kOp,
              "{} {} with {} {}: a resumed run continues in its own folder (to continue a copy elsewhere, copy the "
              "folder and resume the copy)",
              args.what("out"), c.out_dir, args.what("resume"), dir);
    c.out_dir = dir;
  }
  return c;
}

TrainArgs parse_train_flags(const std::vector<std::string>& flags) {
  TrainArgs args;
  auto is_option = [](const std::string& token) {
    // "--x"; a negative number ("-1", "-1e-3") is a value
    return token.rfind("--", 0) == 0 && token.size() > 2;
  };
  for (size_t i = 0; i < flags.size();) {
    const std::string& token = flags[i];
    VIT_CHECK(is_option(token), kOp, "'{}' is not an option (the options are --name value, or --name=value)", token);
    const size_t eq = token.find('=');
    const std::string name = name_of_flag(token.substr(0, eq));
    VIT_CHECK(find_option(name) != nullptr || model::find_model_option(name) != nullptr, kOp,
              "unknown option {} (`vit train --help` lists them)", token.substr(0, eq));
    std::vector<std::string> values;
    ++i;
    if (eq != std::string::npos) {
      values.push_back(token.substr(eq + 1));
    } else {
      while (i < flags.size() && !is_option(flags[i])) values.push_back(flags[i++]);
    }
    const TrainOption* o = find_option(name);
    const bool flag = o ? o->arity == Arity::Flag : model::find_model_option(name)->toggle;
    VIT_CHECK(!flag || values.size() <= 1, kOp, "{} takes no value, or true/false (as {}=false), got {}", flag_of(name),
              flag_of(name), values.size());
    VIT_CHECK(flag || !values.empty(), kOp, "{} needs a value", flag_of(name));
    args.set(name, std::move(values));
  }
  return args;
}

}  // namespace vit::train
