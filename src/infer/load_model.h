// Loading a model for inference from any file vit reads (io/weights_file.h: .safetensors, torch.save
// .pth/.bin, .npz), by two short paths onto one source (infer/model_source.h): our own checkpoints
// (config, class names, preprocessing and int8 scales in their metadata), or timm / torchvision /
// Hugging Face / JAX weights (layout detected or forced, config inferred from shapes). Then the
// overrides of LoadSettings, the position table resampled to another resolution as timm does
// (--image-size), and one build.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "infer/load_options.h"
#include "infer/preprocess.h"
#include "io/weights.h"
#include "model/layouts/layout.h"
#include "model/vision_transformer.h"

namespace vit::infer {

// Applies the preprocessing overrides of `options` to `p` for a model of `channels` channels:
// "[preprocess] --std needs 1 or 3 values (...)", "--mean values must be finite numbers, got inf".
void apply_preprocess_overrides(Preprocess& p, const LoadSettings& options, int64_t channels);

struct LoadedModel {
  std::unique_ptr<model::VisionTransformer> model;
  std::string layout;                    // "vit", "timm", "torchvision", "huggingface", "jax"
  Preprocess preprocess;                 // the layout's (or checkpoint's) evaluation transform
  std::vector<std::string> class_names;  // from the checkpoint, ImageNet-1k for 1000 classes, else numbers
  // Whether the names mean something: recorded by the file (ours) or ImageNet-1k's for a 1000-class
  // head; false when every name is its row's number (a foreign head of another size).
  bool named_classes = false;
  std::vector<std::string> missing_keys, unexpected_keys;  // with strict = false
  std::vector<std::string> ignored_keys;      // known keys inference does not use (DINOv2's mask_token, ...)
  model::Family family = model::Family::Vit;  // what the keys say (model::family_name; our checkpoints: vit)
  std::string checksum;                 // our checkpoints: the verified checksum ("" for an older file without one)
  checkpoint::CheckpointInfo recorded;  // our checkpoints: what the run recorded (data, progress, config)
  int64_t file_image_size = 0;          // the resolution the file's position table is for (before image_size)
  bool ema = false;                     // our checkpoints: the EMA weights were loaded
  bool recorded_ema = false;            // our checkpoints: the run evaluated its EMA weights
  // Our checkpoints holding two weight sets: which was loaded, for output lines ("EMA weights, as
  // the run evaluated (--raw: the raw weights)", checkpoint::weights_note); "" otherwise.
  std::string weights_note;
  // The file format and, for torch.save and .npz files, where the weights came from: "PyTorch
  // (torch.save) file, state dict 'model'; skipped: epoch (int), args (argparse.Namespace, never run)".
  io::WeightsFormat format = io::WeightsFormat::Safetensors;
  // Loaded with --allow-nonfinite (NaN/Inf weights asked for): its outputs may be NaN too, and are
  // answered as they are (otherwise a non-finite output is an error).
  bool nonfinite_allowed = false;
  std::string source_note;
};

LoadedModel load_model(const std::string& path, const LoadSettings& options = {});

// Gives every parameter (and int8 scale) of `model` that still borrows a memory-mapped file memory
// of its own, so the model never reads the file again: what `vit serve` does for the autograd
// model behind /v1/attention, whose mapped pages the inference session releases (WeightPages::Own).
// Costs one copy of those weights.
void own_file_weights(model::VisionTransformer& model);

// The metadata under which to save a loaded model as our checkpoint (vit quantize): ours keep what
// their run recorded; a foreign layout gets its config, class names and evaluation transform.
checkpoint::CheckpointInfo checkpoint_info(const LoadedModel& m);

// A Preprocess as the "preprocess" metadata of a checkpoint records it (checkpoint.h).
std::string preprocess_json(const Preprocess& p);
// The "preprocess" metadata of a checkpoint read back, every field checked ("[checkpoint] PATH: ...").
Preprocess parse_preprocess(const std::string& text, int64_t channels, const std::string& path);
// A model's evaluation transform for another input size: the crop becomes `size` and the resize
// keeps its ratio to the crop (timm's crop_pct: 256/224 stays 256/224).
Preprocess at_size(Preprocess p, int64_t size);

// The 1000 ImageNet-1k class names (torchvision's category names).
const std::vector<std::string>& imagenet_class_names();

}  // namespace vit::infer
