// A checkpoint written by vit, as a model source (see model_source.h): everything is in its metadata.
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "infer/load_model.h"
#include "infer/model_source.h"

namespace vit::infer {

Preprocess parse_preprocess(const std::string& text, int64_t channels, const std::string& path) {
  Preprocess p;
  try {
    const auto j = nlohmann::json::parse(text);
    p.resize = j.at("resize").get<int64_t>();
    p.square = j.at("square").get<bool>();
    p.crop = j.at("crop").get<int64_t>();
    p.filter = parse_filter(j.at("filter").get<std::string>());
    p.mean = j.at("mean").get<std::vector<double>>();
    p.std = j.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint",
         "{}: metadata 'preprocess' is not {{\"resize\", \"square\", \"crop\", \"filter\", \"mean\", \"std\"}} ({})",
         path, e.what());
  } catch (const Error& e) {
    checkpoint::rethrow_for_file(path, e, "metadata 'preprocess'");
  }
  VIT_CHECK(p.resize > 0 && p.resize <= 65536 && p.crop >= 0 && p.crop <= 65536, "checkpoint",
            "{}: metadata 'preprocess' resize {} / crop {} out of range", path, p.resize, p.crop);
  VIT_CHECK(static_cast<int64_t>(p.mean.size()) == channels && static_cast<int64_t>(p.std.size()) == channels,
            "checkpoint", "{}: metadata 'preprocess' has {} means and {} stds for {} channels", path, p.mean.size(),
            p.std.size(), channels);
  for (size_t c = 0; c < p.mean.size(); ++c) {
    VIT_CHECK(std::isfinite(p.mean[c]) && std::isfinite(p.std[c]) && p.std[c] > 0, "checkpoint",
              "{}: metadata 'preprocess' mean/std[{}] = {}/{} (finite, std > 0)", path, c, number_str(p.mean[c]),
              number_str(p.std[c]));
  }
  return p;
}

namespace {

// The evaluation transform a checkpoint records: its "preprocess" metadata, or (older files) a
// square resize to the model's size with the recorded normalisation.
Preprocess recorded_preprocess(const checkpoint::CheckpointInfo& info, const std::string& path) {
  const model::ViTConfig& config = info.model;
  if (!info.preprocess_json.empty()) return parse_preprocess(info.preprocess_json, config.in_channels, path);
  Preprocess p;
  p.mean = info.normalization.mean;
  p.std = info.normalization.std;
  p.resize = config.image_size;
  p.square = true;
  p.crop = 0;
  p.filter = Filter::Bilinear;
  return p;
}

}  // namespace

ModelSource own_checkpoint_source(const io::WeightsFile& file, const LoadSettings& options) {
  const std::string& path = file.path;
  checkpoint::LoadedCheckpoint checkpoint =
      checkpoint::parse_checkpoint(file, {.allow_nonfinite = options.allow_nonfinite});
  VIT_CHECK(!options.layout || *options.layout == model::Layout::Timm, "checkpoint",
            "{}: a checkpoint written by vit train (weights under timm's names); --layout {} does not apply to it",
            path, model::layout_name(*options.layout));
  ModelSource s;
  LoadedModel& d = s.described;
  d.layout = "vit";
  d.checksum = checkpoint.checksum;
  s.config = checkpoint.info.model;
  s.records_config = true;
  s.recorded_heads = s.config.num_heads;
  d.ema = checkpoint::uses_ema(checkpoint, options.weights);
  d.recorded_ema = checkpoint::uses_ema(checkpoint, WeightSet::Recorded);
  d.weights_note = checkpoint::weights_note(checkpoint, d.ema);
  s.weights = d.ema ? std::move(checkpoint.ema) : std::move(checkpoint.weights);
  VIT_CHECK(!s.weights.empty(), "checkpoint", "{}: no {}weights in this checkpoint", path, d.ema ? "EMA " : "");
  d.class_names = checkpoint.info.class_names;
  d.preprocess = recorded_preprocess(checkpoint.info, path);
  s.scales = std::move(checkpoint.scales);
  if (!checkpoint.info.source_family.empty()) {  // a foreign model's copy
    d.family = model::parse_family(checkpoint.info.source_family, checkpoint.path);
  }
  d.recorded = std::move(checkpoint.info);
  return s;
}

}  // namespace vit::infer
