// Checkpoint files (see checkpoint.h).
#include "train/checkpoint.h"

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace vit::train {

static constexpr const char* kFormat = "vit-checkpoint-1";

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
      {"format", kFormat},
      {"model_config", info.model.to_json()},
      {"train_config", info.train_config_json.empty() ? "{}" : info.train_config_json},
      {"epoch", std::to_string(info.epoch)},
      {"step", std::to_string(info.step)},
      {"elapsed_seconds", fmt::format("{:.17g}", info.elapsed_seconds)},
      {"class_names", nlohmann::json(info.class_names).dump()},
      {"normalization", nlohmann::json{{"mean", info.normalization.mean}, {"std", info.normalization.std}}.dump()},
      {"optimizer", optimizer ? (dynamic_cast<const optim::AdamW*>(optimizer) ? "adamw" : "sgd") : "none"},
  };
  io::save_safetensors(path, tensors, metadata);
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  const io::SafetensorsFile file = io::load_safetensors(path);
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    VIT_CHECK(it != file.metadata.end(), "checkpoint",
              "{}: not a checkpoint written by vit train (no '{}' in its metadata); timm, torchvision and Hugging Face "
              "weights are for vit predict / vit attention", path, key);
    return it->second;
  };
  VIT_CHECK(meta("format") == kFormat, "checkpoint", "{}: unknown checkpoint format '{}'", path, meta("format"));
  LoadedCheckpoint c;
  try {
    c.info.model = model::ViTConfig::from_json(meta("model_config"));
    c.info.train_config_json = meta("train_config");
    c.info.epoch = std::stoll(meta("epoch"));
    c.info.step = std::stoll(meta("step"));
    c.info.elapsed_seconds = std::stod(meta("elapsed_seconds"));
    c.info.class_names = nlohmann::json::parse(meta("class_names")).get<std::vector<std::string>>();
    const auto norm = nlohmann::json::parse(meta("normalization"));
    c.info.normalization.mean = norm.at("mean").get<std::vector<double>>();
    c.info.normalization.std = norm.at("std").get<std::vector<double>>();
  } catch (const vit::Error& e) {
    fail("checkpoint", "{}: {}", path, e.what());
  } catch (const std::exception& e) {
    fail("checkpoint", "{}: corrupt metadata ({})", path, e.what());
  }
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("optimizer.", 0) == 0) {
      c.optimizer.emplace_back(name.substr(10), t);
    } else if (name.rfind("ema.", 0) == 0) {
      c.ema.emplace_back(name.substr(4), t);
    } else {
      VIT_CHECK(t.dtype() == DType::F32, "checkpoint", "{}: weight '{}' is {}, expected float32", path, name,
                dtype_name(t.dtype()));
      c.weights.emplace_back(name, t);
    }
  }
  return c;
}

std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, bool use_ema) {
  auto model = std::make_unique<model::VisionTransformer>(checkpoint.info.model, std::make_shared<Generator>(0));
  model->load_state_dict(use_ema && !checkpoint.ema.empty() ? checkpoint.ema : checkpoint.weights);
  return model;
}

}  // namespace vit::train
