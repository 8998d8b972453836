// `vit eval`: loss, top-1/top-5, per-class accuracy and confusion matrix of a checkpoint.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "core/printable.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "infer/load_model.h"
#include "train/evaluate.h"
#include "train/utf8.h"

namespace vit::cli {

namespace {

struct EvalOptions : LoadFlags {
  std::string data = "data/mnist", split = "test";
  bool json = false;
  int64_t batch = 500;
  std::string tta = "none";
  std::string residency = "auto";
  int64_t loader_threads = 0;
};

void add_eval_flags(CLI::App* cmd, EvalOptions& o) {
  cmd->add_option("--checkpoint", o.checkpoint,
                  "model file: .safetensors (ours, int8, timm, torchvision, Hugging Face), PyTorch .pth/.bin or JAX "
                  ".npz (a classifier)")
      ->required();
  // The load options that apply to scoring a classifier; an image folder's photos are shaped and
  // normalised by the model's evaluation transform (or these overrides), as vit predict does.
  add_load_options(cmd, o,
                   {"layout", "heads", "ema", "raw", "allow_nonfinite", "precision", "resize", "crop", "interpolation",
                    "mean", "std"});
  o.max_pixels = data::kDefaultMaxPixels;
  cmd->add_option("--data", o.data, "dataset directory")->capture_default_str();
  cmd->add_option("--split", o.split, "test or train")->capture_default_str()->check(CLI::IsMember({"test", "train"}));
  cmd->add_option("--batch-size", o.batch, "batch size")->capture_default_str()->check(kPositive);
  cmd->add_option("--max-pixels", o.max_pixels, "image folders: refuse images with more pixels")
      ->capture_default_str()
      ->check(kPositive);
  // (Both checked by the data layer, as vit train's: data::parse_residency, data::check_loader_threads.)
  cmd->add_option("--data-residency", o.residency, data::kResidencyHelp)->capture_default_str();
  cmd->add_option("--loader-threads", o.loader_threads, data::kLoaderThreadsHelp)->capture_default_str();
  cmd->add_option("--tta", o.tta,
                  "test-time augmentation, reported beside the plain single-view result: none, or flip (the mean "
                  "probabilities of each image and its horizontal mirror)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "flip"}));
  cmd->add_flag("--json", o.json, "print one JSON object");
  cmd->add_option("--threads", o.threads, "threads (0: all cores)")->check(kThreads);
}

// Any file vit loads (ours, its int8 copy, timm, torchvision, Hugging Face), asked what it can
// do: only a classifier has classes to score.
infer::LoadedModel load_classifier(const EvalOptions& o, const infer::LoadSettings& settings) {
  infer::LoadedModel m = infer::load_model(o.checkpoint, settings);
  if (m.layout == "vit" && m.checksum.empty()) warn_no_checksum(o.checkpoint);
  const model::ViTConfig& mc = m.model->config();
  VIT_CHECK(mc.has_head() && !mc.projection, "eval",
            "{}: {} has no classifier head ({}): there are no classes to score (vit embed gives its embeddings)",
            o.checkpoint, mc.name, mc.projection ? "its head is CLIP's image projection" : "a feature extractor");
  return m;
}

// The dataset, its images checked against the model's input and its classes matched to the model's.
data::Dataset load_eval_data(const EvalOptions& o, const infer::LoadedModel& m) {
  const model::ViTConfig& mc = m.model->config();
  data::set_loader_threads(o.loader_threads);
  // Photos of an image folder: the model's own evaluation transform (the shorter side resized and a
  // centre crop, for a timm or torchvision model), exactly vit predict's; IDX and CIFAR arrays are
  // used as they are.
  const infer::Preprocess preprocess = m.preprocess;
  const int64_t channels = mc.in_channels;
  const data::ImageShaper shaper = [preprocess, channels](const data::Image& image) {
    return infer::resize_and_crop(data::convert_channels(image, channels), preprocess);
  };
  data::Dataset d =
      data::load_dataset(o.data, o.split == "test" ? data::Split::Test : data::Split::Train, mc.in_channels,
                         mc.image_size, o.max_pixels, data::parse_residency(o.residency), shaper);
  // Class names as training recorded them (bytes that are not UTF-8 as \xHH), so the data a
  // model was trained on matches its checkpoint.
  (void)train::escape_class_names(d);
  if (const std::string note = data::skipped_note(d); !note.empty()) fmt::print(stderr, "note: {}\n", note);
  VIT_CHECK(d.channels == mc.in_channels && d.height == mc.image_size && d.width == mc.image_size, "eval",
            "{}: images are {}x{}x{} but {} expects {}x{}x{}", d.source, d.channels, d.height, d.width, o.checkpoint,
            mc.in_channels, mc.image_size, mc.image_size);
  // Scored by class name where the model has names (ours recorded, ImageNet's for 1000 classes):
  // they are the truth (its outputs' order). A foreign model without names is scored by position.
  const bool named = m.layout == "vit" ? !m.recorded.class_names.empty() : mc.num_classes == 1000;
  if (named) {
    const std::vector<std::string>& model_names = m.layout == "vit" ? m.recorded.class_names : m.class_names;
    const std::vector<std::string> missing = data::map_classes(d, model_names, "the checkpoint " + o.checkpoint);
    if (!missing.empty() && m.layout == "vit")
      fmt::print(stderr, "note: {} has no images of: {}\n", d.source, fmt::join(missing, ", "));
  }
  return d;
}

// What evaluate() measured: the plain single-view result and, with --tta, the augmented one.
struct EvalReport {
  const EvalOptions& o;
  const infer::LoadedModel& m;
  infer::Precision precision;
  train::Tta tta;
  train::EvalResult plain;
  std::optional<train::EvalResult> augmented;

  std::string class_name(size_t k) const { return k < m.class_names.size() ? m.class_names[k] : std::to_string(k); }
};

void print_json(const EvalReport& e) {
  const train::EvalResult& r = e.plain;
  nlohmann::ordered_json j = {{"checkpoint", e.o.checkpoint},
                              {"data", e.o.data},
                              {"split", e.o.split},
                              {"images", r.count},
                              {"loss", r.loss},
                              {"top1", r.top1},
                              {"top5", r.top5},
                              {"precision", infer::precision_name(e.precision)},
                              {"weights", e.m.weights_note.empty() ? "" : (e.m.ema ? "ema" : "raw")}};
  nlohmann::ordered_json per_class = nlohmann::ordered_json::object();
  for (size_t k = 0; k < r.per_class_accuracy.size(); ++k) per_class[e.class_name(k)] = r.per_class_accuracy[k];
  j["per_class_accuracy"] = per_class;
  j["confusion"] = r.confusion;
  if (e.augmented) {
    j["tta"] = {{"mode", train::tta_name(e.tta)},
                {"loss", e.augmented->loss},
                {"top1", e.augmented->top1},
                {"top5", e.augmented->top5}};
  }
  std::printf("%s\n", j.dump().c_str());
}

void print_text(const EvalReport& e) {
  const train::EvalResult& r = e.plain;
  const std::string& weights = e.m.weights_note;
  std::printf("%s on %s (%s split, %ld images%s)%s\n", e.o.checkpoint.c_str(), e.o.data.c_str(), e.o.split.c_str(),
              r.count, e.precision == infer::Precision::BF16 ? ", bf16" : "",
              weights.empty() ? "" : (": " + weights).c_str());
  std::printf("loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", r.loss, 100 * r.top1, 100 * r.top5);
  if (e.augmented) {
    std::printf("with test-time augmentation (%s): loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", train::tta_name(e.tta),
                e.augmented->loss, 100 * e.augmented->top1, 100 * e.augmented->top5);
  }
  std::printf("per-class accuracy:\n");
  for (size_t k = 0; k < r.per_class_accuracy.size(); ++k) {
    std::printf("  %-12s %6.2f%%\n", printable(e.class_name(k)).c_str(), 100 * r.per_class_accuracy[k]);
  }
  std::printf("confusion matrix (rows: true, columns: predicted):\n      ");
  for (size_t k = 0; k < r.confusion.size(); ++k) std::printf("%6.6s", printable(e.class_name(k)).c_str());
  std::printf("\n");
  for (size_t i = 0; i < r.confusion.size(); ++i) {
    std::printf("%6.6s", printable(e.class_name(i)).c_str());
    for (int64_t v : r.confusion[i]) std::printf("%6ld", v);
    std::printf("\n");
  }
}

void run_eval(const EvalOptions& o) {
  set_threads(o.threads);
  const infer::LoadSettings settings = o.settings();
  const infer::Precision precision = settings.precision;
  note_precision(precision);
  const infer::LoadedModel m = load_classifier(o, settings);
  model::check_memory(m.model->config(), o.batch, false);
  const data::Dataset d = load_eval_data(o, m);
  const data::Normalization normalization{m.preprocess.mean, m.preprocess.std};
  EvalReport report{o, m, precision, train::parse_tta(o.tta), {}, std::nullopt};
  report.plain = train::evaluate(*m.model, d, normalization, o.batch, {}, precision);
  if (report.tta != train::Tta::None) {
    report.augmented = train::evaluate(*m.model, d, normalization, o.batch, {}, precision, report.tta);
  }
  if (o.json) {
    print_json(report);
  } else {
    print_text(report);
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "evaluate a checkpoint on a dataset");
  add_eval_flags(cmd, *o);
  cmd->callback([o] { run_eval(*o); });
}

}  // namespace vit::cli
