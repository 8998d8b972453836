// Checkpoint files (see checkpoint.h).
#include "train/checkpoint.h"

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace vit::train {

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const optim::Optimizer* optimizer,
                     const optim::ModelEma* ema, const CheckpointInfo& info) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t);
  if (optimizer) {
    for (const auto& [name, t] : optimizer->state()) tensors.emplace_back("optimizer." + name, t);
  }
  if (ema) {
    for (const auto& [name, t] : ema->averages()) tensors.emplace_back("ema." + name, t);
  }
  const std::map<std::string, std::string> metadata = {
      {"format", infer::kCheckpointFormat},
      {"model_config", info.model.to_json()},
      {"train_config", info.train_config_json.empty() ? "{}" : info.train_config_json},
      {"epoch", std::to_string(info.epoch)},
      {"step", std::to_string(info.step)},
      {"batch", std::to_string(info.batch)},
      {"epoch_stats", info.epoch_stats_json.empty() ? "{}" : info.epoch_stats_json},
      {"elapsed_seconds", fmt::format("{:.17g}", info.elapsed_seconds)},
      {"class_names", nlohmann::json(info.class_names).dump()},
      {"normalization", nlohmann::json{{"mean", info.normalization.mean}, {"std", info.normalization.std}}.dump()},
      {"optimizer", optimizer ? (dynamic_cast<const optim::AdamW*>(optimizer) ? "adamw" : "sgd") : "none"},
  };
  io::save_safetensors(path, tensors, metadata);
}

std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, bool use_ema) {
  auto model = std::make_unique<model::VisionTransformer>(checkpoint.info.model, std::make_shared<Generator>(0));
  VIT_CHECK(!use_ema || !checkpoint.ema.empty(), "checkpoint", "{}: no EMA weights in this checkpoint (trained without --ema)",
            checkpoint.path);
  model->load_state_dict(use_ema ? checkpoint.ema : checkpoint.weights);
  return model;
}

}  // namespace vit::train
