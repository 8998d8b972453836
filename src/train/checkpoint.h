// Checkpoints: one safetensors file holding the model weights under timm's names, the optimiser
// state ("optimizer.*"), EMA weights ("ema.*"), and in __metadata__ the model config, the
// training config, epoch/step, class names and normalisation, so `vit eval` / `vit predict`
// need only the file. Written here atomically (temporary file, fsync, rename); read by
// infer/checkpoint_format.h, whose names are re-exported below.
#pragma once

#include <map>
#include <string>

#include "infer/checkpoint_format.h"
#include "model/vision_transformer.h"
#include "optim/optimizer.h"

namespace vit::train {

using infer::CheckpointInfo;
using infer::load_checkpoint;
using infer::LoadedCheckpoint;

void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const optim::Optimizer* optimizer,
                     const optim::ModelEma* ema, const CheckpointInfo& info);

// Builds the model a checkpoint describes and loads its weights (its EMA weights when asked; an
// error if it has none).
std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint, bool use_ema = false);

}  // namespace vit::train
