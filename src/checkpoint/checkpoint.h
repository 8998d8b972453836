// vit's own checkpoint format, written and read here: one safetensors file with the model
// weights under timm's names, optimiser state as "optimizer.*", EMA weights as "ema.*", and in
// __metadata__ "format" = "vit-checkpoint-1", the model and training configs, epoch, step, class
// names and normalisation, so `vit eval`, `vit predict` and `vit train --resume` need only the
// file. Writes are atomic (temporary file, fsync, rename: io::save_safetensors). The training
// state is passed as plain tensors, so this room needs no optimiser: `train` hands them over.
// A room of its own below both `infer` (which reads it) and `train` (which writes and resumes it).
//
// Reading trusts nothing: every metadata value is checked (finite, in range, consistent with
// the others and with the tensors' shapes) and an error names the field and value; the
// checksum over header and data (written since checksums were added; older files load without
// one) must match; NaN/Inf in any tensor is refused unless allowed (--allow-nonfinite).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "io/safetensors.h"
#include "model/layouts/layout.h"
#include "model/vision_transformer.h"
#include "model/vit_config.h"

namespace vit::checkpoint {

inline constexpr const char* kCheckpointFormat = "vit-checkpoint-1";

struct CheckpointInfo {
  model::ViTConfig model;
  std::string train_config_json;  // the TrainConfig as JSON ("{}" when unknown)
  int64_t epoch = 0, step = 0;    // completed epochs; optimiser steps taken
  double elapsed_seconds = 0.0;
  std::vector<std::string> class_names;
  data::Normalization normalization;
  // Batches of epoch `epoch` (0-based, i.e. the next one) already trained on: > 0 for a
  // checkpoint saved mid-epoch (Ctrl-C, --checkpoint-every), with that epoch's running
  // statistics so far as JSON in epoch_stats_json.
  int64_t batch = 0;
  std::string epoch_stats_json;
  // What identifies the data trained on (JSON: image counts, shape, hash), so that a resumed run
  // can tell it is given the same; "" when unknown (checkpoints written before it was saved).
  std::string dataset_json;
  // An int8 model (checkpoint/int8_format.h): the "quantization" metadata as JSON ("" for float32). Written
  // from the model by save_checkpoint; read here.
  std::string quantization_json;
  // The evaluation transform when it is not the default one of vit checkpoints (resize to the
  // image size, no crop, bilinear): a model quantized from timm / torchvision / Hugging Face
  // weights keeps its layout's. JSON {"resize", "square", "crop", "filter", "mean", "std"}; "".
  std::string preprocess_json;
  // The weights the run evaluated (and picked best.safetensors by): "ema" (its EMA weights, saved
  // as "ema.*") or "raw" (the model weights); "" when not recorded (files written before it was).
  // Loading defaults to these (WeightSet::Recorded).
  std::string evaluated;
  // A copy of a foreign model (vit quantize of a timm / torchvision / Hugging Face file): the family
  // its keys said ("clip", "dinov2", "deit", "vit") and the layout it came in, kept so that the copy
  // answers as the original does; "" for a model trained by vit.
  std::string source_family, source_layout;
  // A file whose Linear and convolution weights are stored as bfloat16 (checkpoint/bf16_format.h):
  // the "storage" metadata as JSON ("" when every weight is float32). Written from save_checkpoint's
  // WeightStorage; read here.
  std::string storage_json;
};

// Which of a checkpoint's weight sets to load: the one its run evaluated (the default), the model
// weights ("raw", --raw) or their EMA (--ema).
enum class WeightSet { Recorded, Raw, Ema };

// The training state saved beside the weights (all empty for a model alone).
struct TrainingState {
  std::string optimizer = "none";       // "adamw", "sgd" or "none" (metadata only)
  model::NamedTensors optimizer_state;  // saved as "optimizer.<name>"
  model::NamedTensors ema;              // saved as "ema.<name>"
};

// How save_checkpoint stores the model's weights: float32, or (`vit quantize --dtype bf16`) the
// Linear and convolution weights as bfloat16, the rest float32 (checkpoint/bf16_format.h).
enum class WeightStorage { F32, BF16 };

// Throws "[checkpoint] PATH: ..." (nothing written) when the metadata cannot be recorded: text
// that is not valid UTF-8 (JSON must be).
void save_checkpoint(const std::string& path, const model::VisionTransformer& model, const CheckpointInfo& info,
                     const TrainingState& state = {}, WeightStorage storage = WeightStorage::F32);
// The __metadata__ save_checkpoint writes, with the same check: `vit train` builds it once before
// its first step, so that no save fails over what it records after hours of training.
std::map<std::string, std::string> checkpoint_metadata(const std::string& path, const CheckpointInfo& info,
                                                       const std::string& optimizer);

struct LoadedCheckpoint {
  std::string path;      // the file it came from (for messages)
  std::string checksum;  // the verified "xxh64:..." checksum; empty: an older file without one
  CheckpointInfo info;
  model::NamedTensors weights;    // model parameters (timm names)
  model::NamedTensors optimizer;  // without the "optimizer." prefix
  model::NamedTensors ema;        // without the "ema." prefix
  model::NamedTensors scales;     // an int8 model's weight scales (checkpoint/int8_format.h), not in `weights`
};

struct ReadOptions {
  bool allow_nonfinite = false;  // load tensors holding NaN/Inf (refused by default)
};

// True when the file's metadata says it is a vit checkpoint.
bool is_vit_checkpoint(const io::WeightsFile& file);
// Throws "[checkpoint] FILE: ..." when the file is not a (valid) vit checkpoint, naming the
// metadata field and value, the checksum mismatch or the non-finite tensor.
LoadedCheckpoint parse_checkpoint(const io::WeightsFile& file, const ReadOptions& options = {});
LoadedCheckpoint load_checkpoint(const std::string& path, const ReadOptions& options = {});

// The checks of what save_checkpoint writes and parse_checkpoint reads (also run before a
// save, so nothing writes a checkpoint that would not load): "[checkpoint] FILE: ..." naming
// the field. Normalisation: per-channel means in [0, 1] and stds in (0, 1] (pixels are scaled
// to [0, 1]); class names: at most num_classes, non-empty, unique; LayerNorm eps in (0, 0.01].
void validate_checkpoint_info(const CheckpointInfo& info, const std::string& path);

// Refuses NaN/Inf in a file's float tensors ("[checkpoint] FILE: tensor 'x' holds NaN at index
// i ...") in one pass over its data, which also computes the checksum when `checksum` is set.
// (A .pth or .npz file, io/weights_file.h, has no data section: its decoded tensors are scanned,
// the EMA state dict's with `ema`.)
io::ContentScan scan_checkpoint_file(const io::WeightsFile& file, bool checksum, bool allow_nonfinite,
                                     bool ema = false);

// Rethrows an error met while reading `path` as "[checkpoint] FILE: [context: ]message"; an
// error that already names the file so passes unchanged (never "[checkpoint] F: [checkpoint] F:").
[[noreturn]] void rethrow_for_file(const std::string& path, const std::exception& e, const std::string& context = "");

// Whether `asked` means the EMA weights of `checkpoint`: Recorded means the set its run evaluated
// (info.evaluated; a file from before that was recorded: its EMA weights when it has them, as every
// run with EMA evaluated those). Throws "[checkpoint] FILE: no EMA weights ..." for Ema without them.
bool uses_ema(const LoadedCheckpoint& checkpoint, WeightSet asked);
// Which weights were loaded, for output lines: "EMA weights, as the run evaluated", "raw weights
// (--raw); the run evaluated its EMA weights", ...; "" for a file with one set (nothing to choose).
std::string weights_note(const LoadedCheckpoint& checkpoint, bool ema);

// Builds the model a checkpoint describes and loads its weights (those its run evaluated, or the
// set asked for; an error for EMA weights it has none of); an int8 checkpoint gives an int8 model.
std::unique_ptr<model::VisionTransformer> model_from_checkpoint(const LoadedCheckpoint& checkpoint,
                                                                WeightSet weights = WeightSet::Recorded);

}  // namespace vit::checkpoint
