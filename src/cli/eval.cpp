// `vit eval`: loss, top-1/top-5, per-class accuracy and confusion matrix of a checkpoint.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/validators.h"
#include "train/evaluate.h"
#include "train/utf8.h"

namespace vit::cli {

void add_eval_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, data = "data/mnist", split = "test";
    bool json = false, ema = false, raw = false, allow_nonfinite = false;
    int threads = 0;
    int64_t batch = 500;
    int64_t max_pixels = data::kDefaultMaxPixels;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("eval", "evaluate a checkpoint on a dataset");
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file (.safetensors written by vit train)")->required();
  cmd->add_option("--data", o->data, "dataset directory")->capture_default_str();
  cmd->add_option("--split", o->split, "test or train")->capture_default_str()->check(CLI::IsMember({"test", "train"}));
  cmd->add_option("--batch-size", o->batch, "batch size")->capture_default_str()->check(kPositive);
  cmd->add_option("--max-pixels", o->max_pixels, "image folders: refuse images with more pixels")
      ->capture_default_str()
      ->check(kPositive);
  add_weight_flags(cmd, o->ema, o->raw);
  cmd->add_flag("--allow-nonfinite", o->allow_nonfinite, "load weights that hold NaN or Inf (refused by default)");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o] {
    set_threads(o->threads);
    const checkpoint::LoadedCheckpoint ckpt =
        checkpoint::load_checkpoint(o->checkpoint, {.allow_nonfinite = o->allow_nonfinite});
    if (ckpt.checksum.empty()) warn_no_checksum(o->checkpoint);
    const bool ema = checkpoint::uses_ema(ckpt, weight_set(o->ema, o->raw));
    const std::string weights = checkpoint::weights_note(ckpt, ema);
    auto model = checkpoint::model_from_checkpoint(ckpt, ema ? checkpoint::WeightSet::Ema : checkpoint::WeightSet::Raw);
    const model::ViTConfig& mc = ckpt.info.model;
    model::check_memory(mc, o->batch, false);
    data::Dataset d = data::load_dataset(o->data, o->split == "test" ? data::Split::Test : data::Split::Train,
                                         mc.in_channels, mc.image_size, o->max_pixels);
    // Class names as training recorded them (bytes that are not UTF-8 as \xHH), so the data a
    // model was trained on matches its checkpoint.
    (void)train::escape_class_names(d);
    VIT_CHECK(d.channels == mc.in_channels && d.height == mc.image_size && d.width == mc.image_size, "eval",
              "{}: images are {}x{}x{} but {} expects {}x{}x{}", d.source, d.channels, d.height, d.width, o->checkpoint,
              mc.in_channels, mc.image_size, mc.image_size);
    // Scored by class name: the checkpoint's names are the truth (its outputs' order).
    if (!ckpt.info.class_names.empty()) {
      const std::vector<std::string> missing =
          data::map_classes(d, ckpt.info.class_names, "the checkpoint " + o->checkpoint);
      if (!missing.empty()) fmt::print(stderr, "note: {} has no images of: {}\n", d.source, fmt::join(missing, ", "));
    }
    const train::EvalResult r = train::evaluate(*model, d, ckpt.info.normalization, o->batch);
    const std::vector<std::string>& names = ckpt.info.class_names;
    auto name_of = [&](size_t k) { return k < names.size() ? names[k] : std::to_string(k); };
    if (o->json) {
      nlohmann::ordered_json j = {{"checkpoint", o->checkpoint},
                                  {"data", o->data},
                                  {"split", o->split},
                                  {"images", r.count},
                                  {"loss", r.loss},
                                  {"top1", r.top1},
                                  {"top5", r.top5},
                                  {"weights", ema ? "ema" : "raw"}};
      nlohmann::ordered_json per_class = nlohmann::ordered_json::object();
      for (size_t k = 0; k < r.per_class_accuracy.size(); ++k) per_class[name_of(k)] = r.per_class_accuracy[k];
      j["per_class_accuracy"] = per_class;
      j["confusion"] = r.confusion;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("%s on %s (%s split, %ld images)%s\n", o->checkpoint.c_str(), o->data.c_str(), o->split.c_str(),
                r.count, weights.empty() ? "" : (": " + weights).c_str());
    std::printf("loss %.4f  top-1 %.2f%%  top-5 %.2f%%\n", r.loss, 100 * r.top1, 100 * r.top5);
    std::printf("per-class accuracy:\n");
    for (size_t k = 0; k < r.per_class_accuracy.size(); ++k) {
      std::printf("  %-12s %6.2f%%\n", name_of(k).c_str(), 100 * r.per_class_accuracy[k]);
    }
    std::printf("confusion matrix (rows: true, columns: predicted):\n      ");
    for (size_t k = 0; k < r.confusion.size(); ++k) std::printf("%6.6s", name_of(k).c_str());
    std::printf("\n");
    for (size_t i = 0; i < r.confusion.size(); ++i) {
      std::printf("%6.6s", name_of(i).c_str());
      for (int64_t v : r.confusion[i]) std::printf("%6ld", v);
      std::printf("\n");
    }
  });
}

}  // namespace vit::cli
