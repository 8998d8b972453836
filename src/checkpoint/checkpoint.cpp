// vit checkpoints: the metadata checked as a whole, writing, and the model of a checkpoint read by
// read_checkpoint.cpp (see checkpoint.h).
#include "checkpoint/checkpoint.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/bf16_format.h"
#include "checkpoint/int8_format.h"
#include "core/printable.h"

namespace vit::checkpoint {
namespace {

constexpr double kMaxLayerNormEps = 1e-2;  // timm 1e-6, PyTorch 1e-5, Hugging Face 1e-12

}  // namespace

[[noreturn]] void rethrow_for_file(const std::string& path, const std::exception& e, const std::string& context) {
  const std::string message = e.what();
  if (message.rfind("[checkpoint] " + path + ": ", 0) == 0) throw Error(message);  // names the file already
  if (context.empty()) fail("checkpoint", "{}: {}", path, message);
  fail("checkpoint", "{}: {}: {}", path, context, message);
}

void validate_checkpoint_info(const CheckpointInfo& info, const std::string& path) {
  const model::ViTConfig& m = info.model;
  try {
    m.validate();
  } catch (const std::exception& e) {
    rethrow_for_file(path, e, "model_config");
  }
  VIT_CHECK(m.eps <= kMaxLayerNormEps, "checkpoint",
            "{}: model_config eps is {}, outside (0, {}] (LayerNorm eps: timm "
            "1e-6, PyTorch 1e-5)",
            path, number_str(m.eps), kMaxLayerNormEps);
  // Normalisation: one finite mean and std per input channel, in the range pixels in [0, 1] allow.
  const data::Normalization& n = info.normalization;
  const auto C = static_cast<size_t>(m.in_channels);
  VIT_CHECK(n.mean.size() == C && n.std.size() == C, "checkpoint",
            "{}: normalization has {} means and {} stds for a model of {} input channels", path, n.mean.size(),
            n.std.size(), C);
  for (size_t c = 0; c < C; ++c) {
    VIT_CHECK(std::isfinite(n.mean[c]) && n.mean[c] >= 0 && n.mean[c] <= data::kMaxNormalizationMean, "checkpoint",
              "{}: normalization mean[{}] is {}, outside [0, {}] (pixels are scaled to [0, 1])", path, c,
              number_str(n.mean[c]), data::kMaxNormalizationMean);
    VIT_CHECK(std::isfinite(n.std[c]) && n.std[c] > 0 && n.std[c] <= data::kMaxNormalizationStd, "checkpoint",
              "{}: normalization std[{}] is {}, outside (0, {}] (pixels are scaled to [0, 1])", path, c,
              number_str(n.std[c]), data::kMaxNormalizationStd);
  }
  // Class names: at most one per output, each non-empty and different (a prediction names one).
  VIT_CHECK(static_cast<int64_t>(info.class_names.size()) <= m.num_classes, "checkpoint",
            "{}: class_names has {} names for a model of {} classes", path, info.class_names.size(), m.num_classes);
  std::set<std::string> seen;
  for (size_t k = 0; k < info.class_names.size(); ++k) {
    const std::string& name = info.class_names[k];
    VIT_CHECK(!name.empty(), "checkpoint", "{}: class_names[{}] is empty", path, k);
    VIT_CHECK(seen.insert(name).second, "checkpoint", "{}: class_names[{}] '{}' repeats an earlier class name", path, k,
              printable(name));
  }
  // Progress: every finished epoch trained at least one batch, each batch is one step.
  VIT_CHECK(info.epoch >= 0 && info.step >= 0 && info.batch >= 0, "checkpoint",
            "{}: negative epoch/step/batch ({}, {}, {})", path, info.epoch, info.step, info.batch);
  VIT_CHECK(info.batch <= info.step && info.epoch <= info.step - info.batch, "checkpoint",  // no overflow
            "{}: step {} is less than epoch {} + batch {} (every epoch and every batch takes a step)", path, info.step,
            info.epoch, info.batch);
  VIT_CHECK(std::isfinite(info.elapsed_seconds) && info.elapsed_seconds >= 0, "checkpoint",
            "{}: elapsed_seconds is {}, not a finite number >= 0", path, number_str(info.elapsed_seconds));
  nlohmann::json train, stats;
  try {
    train = nlohmann::json::parse(info.train_config_json.empty() ? "{}" : info.train_config_json);
    stats = nlohmann::json::parse(info.epoch_stats_json.empty() ? "{}" : info.epoch_stats_json);
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: train_config or epoch_stats is not valid JSON ({})", path, e.what());
  }
  VIT_CHECK(train.is_object() && stats.is_object(), "checkpoint",
            "{}: train_config and epoch_stats must be JSON objects", path);
  if (train.contains("epochs") && train["epochs"].is_number_integer() && train["epochs"].get<int64_t>() > 0) {
    const auto epochs = train["epochs"].get<int64_t>();
    VIT_CHECK(info.epoch < epochs || (info.epoch == epochs && info.batch == 0), "checkpoint",
              "{}: epoch {} (batch {}) is past the end of train_config's {} epochs", path, info.epoch, info.batch,
              epochs);
  }
  if (info.batch > 0) {  // mid-epoch: the epoch's statistics so far cover exactly `batch` batches
    auto count = [&](const char* key) -> int64_t {
      const auto it = stats.find(key);
      VIT_CHECK(it != stats.end() && it->is_number_integer() && it->get<int64_t>() >= 0, "checkpoint",
                "{}: epoch_stats '{}' is missing or not a count (batch {} is mid-epoch)", path, key, info.batch);
      return it->get<int64_t>();
    };
    const int64_t steps = count("steps"), skipped = count("skipped"), seen_images = count("seen"),
                  correct = count("correct");
    VIT_CHECK(skipped <= info.batch && steps == info.batch - skipped && correct <= seen_images, "checkpoint",
              "{}: epoch_stats ({} steps + {} skipped, {} of {} correct) do not add up to batch {}", path, steps,
              skipped, correct, seen_images, info.batch);
    for (const char* key : {"loss_sum", "seconds"}) {
      const auto it = stats.find(key);
      VIT_CHECK(it != stats.end() && it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0,
                "checkpoint", "{}: epoch_stats '{}' is missing or not a finite number >= 0", path, key);
    }
  }
}

std::map<std::string, std::string> checkpoint_metadata(const std::string& path, const CheckpointInfo& info,
                                                       const std::string& optimizer) {
  std::map<std::string, std::string> metadata;
  try {
    metadata = {
        {"format", kCheckpointFormat},
        {"model_config", info.model.to_json()},
        {"train_config", info.train_config_json.empty() ? "{}" : info.train_config_json},
        {"epoch", std::to_string(info.epoch)},
        {"step", std::to_string(info.step)},
        {"batch", std::to_string(info.batch)},
        {"epoch_stats", info.epoch_stats_json.empty() ? "{}" : info.epoch_stats_json},
        {"elapsed_seconds", fmt::format("{:.17g}", info.elapsed_seconds)},
        {"class_names", nlohmann::json(info.class_names).dump()},
        {"normalization", nlohmann::json{{"mean", info.normalization.mean}, {"std", info.normalization.std}}.dump()},
        {"optimizer", optimizer},
    };
    if (!info.dataset_json.empty()) metadata["dataset"] = info.dataset_json;
    if (!info.quantization_json.empty()) metadata["quantization"] = info.quantization_json;
    if (!info.storage_json.empty()) metadata[kStorageKey] = info.storage_json;
    if (!info.preprocess_json.empty()) metadata["preprocess"] = info.preprocess_json;
    if (!info.source_family.empty()) metadata["source_family"] = info.source_family;
    if (!info.source_layout.empty()) metadata["source_layout"] = info.source_layout;
    if (!info.evaluated.empty()) metadata["evaluated"] = info.evaluated;
    // The header holds these as JSON strings: all of them must be UTF-8 too.
    (void)nlohmann::json(metadata).dump();
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", "{}: cannot record the metadata as JSON ({})", path, e.what());
  }
  return metadata;
}

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const CheckpointInfo& info,
                     const TrainingState& state, WeightStorage storage) {
  validate_checkpoint_info(info, path);
  VIT_CHECK(info.evaluated != "ema" || !state.ema.empty(), "checkpoint",
            "{}: 'evaluated' is ema, but no EMA weights are saved", path);
  CheckpointInfo with_model = info;
  with_model.quantization_json = quantization_metadata(model);  // what the model is, not what info says
  const bool bf16 = storage == WeightStorage::BF16;
  VIT_CHECK(!bf16 || (with_model.quantization_json.empty() && state.optimizer_state.empty() && state.ema.empty()),
            "checkpoint", "{}: bfloat16 storage is for a float32 model alone (no int8 Linears, optimizer or EMA state)",
            path);
  with_model.storage_json = bf16 ? bf16_storage_metadata(bf16_weight_names(model)) : "";  // what is written
  const std::map<std::string, std::string> metadata = checkpoint_metadata(path, with_model, state.optimizer);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t);
  for (const auto& [name, t] : quantization_scales(model)) tensors.emplace_back(name, t);
  for (const auto& [name, t] : state.optimizer_state) tensors.emplace_back("optimizer." + name, t);
  for (const auto& [name, t] : state.ema) tensors.emplace_back("ema." + name, t);
  io::save_safetensors(path, tensors, metadata, /*checksum=*/true, bf16 ? bf16_weight_bits(model) : io::Bf16Bits{});
}

bool uses_ema(const LoadedCheckpoint& checkpoint, WeightSet asked) {
  if (asked == WeightSet::Recorded) {
    return checkpoint.info.evaluated.empty() ? !checkpoint.ema.empty() : checkpoint.info.evaluated == "ema";
  }
  VIT_CHECK(asked == WeightSet::Raw || !checkpoint.ema.empty(), "checkpoint", "{}: no EMA weights in this {}",
            checkpoint.path,
            checkpoint.scales.empty() ? "checkpoint (trained without --ema)" : "int8 model (it holds one set)");
  return asked == WeightSet::Ema;
}

std::string weights_note(const LoadedCheckpoint& checkpoint, bool ema) {
  if (checkpoint.ema.empty()) return "";
  const bool evaluated_ema = uses_ema(checkpoint, WeightSet::Recorded);
  if (ema == evaluated_ema) {
    return ema ? "EMA weights, as the run evaluated (--raw: the raw weights)"
               : "raw weights, as the run evaluated (--ema: the EMA weights)";
  }
  return ema ? "EMA weights (--ema); the run evaluated its raw weights"
             : "raw weights (--raw); the run evaluated its EMA weights";
}

std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, WeightSet weights) {
  const bool use_ema = uses_ema(checkpoint, weights);
  auto model = std::make_unique<model::VisionTransformer>(checkpoint.info.model, std::make_shared<Generator>(0));
  if (!use_ema) {
    prepare_quantized(*model, checkpoint.scales, quantization_bits(checkpoint.info.quantization_json, checkpoint.path),
                      checkpoint.path);
  }
  try {
    model->load_state_dict(use_ema ? checkpoint.ema : checkpoint.weights);
  } catch (const std::exception& e) {
    rethrow_for_file(checkpoint.path, e, use_ema ? "EMA weights" : "");
  }
  return model;
}

}  // namespace vit::checkpoint
