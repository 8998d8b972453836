// Flags shared by the commands that load a model for inference (predict, attention).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "infer/pretrained.h"

namespace vit::cli {

struct ModelOptions {
  std::string checkpoint, layout;
  int64_t heads = 0, image_size = 0, resize = 0, crop = -1;
  double eps = 0.0;
  std::string act;  // MLP activation override (a LAION CLIP in timm's names: gelu)
  bool no_strict = false, ema = false, allow_nonfinite = false;
  std::string interpolation;
  std::vector<double> mean, std;
  int threads = 0;
  int64_t max_pixels = 0;
};

// Registers --checkpoint, --layout, --heads, --eps, --image-size, --no-strict, --ema,
// --allow-nonfinite, --resize, --crop, --interpolation, --mean, --std, --threads, --max-pixels.
void add_model_options(CLI::App* cmd, ModelOptions& o);
// Loads the model and applies the preprocessing overrides; prints what was not loaded with
// --no-strict, and a warning for a vit checkpoint without a checksum (written before them).
infer::LoadedModel load_for_inference(const ModelOptions& o);
// "warning: FILE has no checksum ..." on stderr.
void warn_no_checksum(const std::string& path);
// A float32 (B, C, H, W) .npy the model takes, checked: shape and finite values ("[op] FILE: ...").
Tensor read_input_npy(const std::string& path, const model::ViTConfig& c, const char* op);
// Images decoded and preprocessed as the checkpoint says, (B, C, H, W); the first file that
// cannot be read is the error.
Tensor read_input_images(const std::vector<std::string>& paths, const infer::LoadedModel& m, int64_t max_pixels);

}  // namespace vit::cli
