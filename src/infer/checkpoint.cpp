// vit checkpoints: writing and reading (see checkpoint.h).
#include "infer/checkpoint.h"

#include <nlohmann/json.hpp>

namespace vit::infer {

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const CheckpointInfo& info,
                     const TrainingState& state) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t);
  for (const auto& [name, t] : state.optimizer_state) tensors.emplace_back("optimizer." + name, t);
  for (const auto& [name, t] : state.ema) tensors.emplace_back("ema." + name, t);
  const std::map<std::string, std::string> metadata = {
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
      {"optimizer", state.optimizer},
  };
  io::save_safetensors(path, tensors, metadata);
}

[[noreturn]] void rethrow_for_file(const std::string& path, const std::exception& e, const std::string& context) {
  const std::string message = e.what();
  if (message.rfind("[checkpoint] " + path + ": ", 0) == 0) throw Error(message);  // names the file already
  if (context.empty()) fail("checkpoint", "{}: {}", path, message);
  fail("checkpoint", "{}: {}: {}", path, context, message);
}

bool is_vit_checkpoint(const io::SafetensorsFile& file) {
  const auto it = file.metadata.find("format");
  return it != file.metadata.end() && file.metadata.count("model_config");
}

LoadedCheckpoint parse_checkpoint(const io::SafetensorsFile& file) {
  const std::string& path = file.path;
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    VIT_CHECK(it != file.metadata.end(), "checkpoint",
              "{}: not a checkpoint written by vit train (no '{}' in its metadata); timm, torchvision and Hugging Face "
              "weights are for vit predict / vit attention", path, key);
    return it->second;
  };
  VIT_CHECK(meta("format") == kCheckpointFormat, "checkpoint", "{}: unknown checkpoint format '{}'", path,
            meta("format"));
  LoadedCheckpoint c;
  c.path = path;
  try {
    c.info.model = model::ViTConfig::from_json(meta("model_config"));
    c.info.train_config_json = meta("train_config");
    c.info.epoch = std::stoll(meta("epoch"));
    c.info.step = std::stoll(meta("step"));
    if (file.metadata.count("batch")) c.info.batch = std::stoll(meta("batch"));
    if (file.metadata.count("epoch_stats")) c.info.epoch_stats_json = meta("epoch_stats");
    VIT_CHECK(c.info.epoch >= 0 && c.info.step >= 0 && c.info.batch >= 0, "checkpoint",
              "{}: negative epoch/step/batch in its metadata", path);
    c.info.elapsed_seconds = std::stod(meta("elapsed_seconds"));
    c.info.class_names = nlohmann::json::parse(meta("class_names")).get<std::vector<std::string>>();
    const auto norm = nlohmann::json::parse(meta("normalization"));
    c.info.normalization.mean = norm.at("mean").get<std::vector<double>>();
    c.info.normalization.std = norm.at("std").get<std::vector<double>>();
  } catch (const vit::Error& e) {
    rethrow_for_file(path, e);
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

LoadedCheckpoint load_checkpoint(const std::string& path) { return parse_checkpoint(io::load_safetensors(path)); }

std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, bool use_ema) {
  auto model = std::make_unique<model::VisionTransformer>(checkpoint.info.model, std::make_shared<Generator>(0));
  VIT_CHECK(!use_ema || !checkpoint.ema.empty(), "checkpoint", "{}: no EMA weights in this checkpoint (trained without --ema)",
            checkpoint.path);
  try {
    model->load_state_dict(use_ema ? checkpoint.ema : checkpoint.weights);
  } catch (const std::exception& e) {
    rethrow_for_file(checkpoint.path, e, use_ema ? "EMA weights" : "");
  }
  return model;
}

}  // namespace vit::infer
