// Checkpoints: one safetensors file holding the model weights under timm's names, the optimiser
// state ("optimizer.*"), EMA weights ("ema.*"), and in __metadata__ the model config, the
// training config, epoch/step, class names and normalisation, so `vit eval` / `vit predict`
// need only the file. Written atomically (temporary file, fsync, rename).
#pragma once

#include <map>
#include <string>

#include "data/loader.h"
#include "model/vision_transformer.h"
#include "optim/optimizer.h"

namespace vit::train {

struct CheckpointInfo {
  model::ViTConfig model;
  std::string train_config_json;  // the TrainConfig as JSON ("{}" when unknown)
  int64_t epoch = 0, step = 0;
  double elapsed_seconds = 0.0;
  std::vector<std::string> class_names;
  data::Normalization normalization;
};

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const optim::Optimizer* optimizer,
                     const optim::ModelEma* ema, const CheckpointInfo& info);

struct LoadedCheckpoint {
  CheckpointInfo info;
  nn::StateDict weights;       // model parameters (timm names)
  optim::NamedTensors optimizer;  // without the "optimizer." prefix
  optim::NamedTensors ema;        // without the "ema." prefix
};

// Reads a checkpoint written by save_checkpoint. Throws "[checkpoint] FILE: ..." when the file
// is unreadable or is not a vit checkpoint.
LoadedCheckpoint load_checkpoint(const std::string& path);

// Builds the model a checkpoint describes and loads its weights (EMA weights when asked and present).
std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, bool use_ema = false);

}  // namespace vit::train
