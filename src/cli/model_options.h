// Flags shared by the commands that load a model for inference (predict, attention).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "infer/predictor.h"

namespace vit::cli {

struct ModelOptions {
  std::string checkpoint, layout;
  int64_t heads = 0, image_size = 0, resize = 0, crop = -1;
  double eps = 0.0;
  std::string act;  // MLP activation override (a LAION CLIP in timm's names: gelu)
  bool no_strict = false, ema = false, raw = false, allow_nonfinite = false;
  std::string interpolation;
  std::vector<double> mean, std;
  int threads = 0;
  int64_t max_pixels = 0;
  std::string precision = "fp32";  // fp32 or bf16 (the inference session's Linear layers)
};

// Registers --checkpoint, --layout, --heads, --eps, --image-size, --no-strict, --ema, --raw,
// --allow-nonfinite, --resize, --crop, --interpolation, --mean, --std, --threads, --max-pixels,
// --precision.
// (vit serve takes --model NAME=FILE instead of --checkpoint: require_checkpoint false.)
void add_model_options(CLI::App* cmd, ModelOptions& o, bool require_checkpoint = true);
// The loading part alone (vit convert): --layout, --heads, --eps, --act, --image-size, --no-strict,
// --ema, --raw, --allow-nonfinite and the preprocessing overrides.
void add_load_options(CLI::App* cmd, ModelOptions& o);
// --precision fp32 | bf16 (the inference session's Linear layers) into `precision`.
void add_precision_option(CLI::App* cmd, std::string& precision);
// The Precision a --precision value says; for bf16 on a CPU without AVX512_BF16, a note on stderr
// that the plain C++ emulation runs (same numbers, much slower).
infer::Precision inference_precision(const std::string& precision);
// The load options these flags say (the preprocessing overrides included).
infer::LoadOptions load_options(const ModelOptions& o);
// Sets --threads, loads the model, and prints what was not loaded with --no-strict, a warning
// for a vit checkpoint without a checksum, and a note when --raw / --ema picks weights other than
// those the run evaluated ("note: FILE: raw weights (--raw); the run evaluated its EMA weights").
infer::LoadedModel load_model(const ModelOptions& o);
// load_model behind the handle every door wraps.
infer::Predictor load_predictor(const ModelOptions& o,
                                infer::Predictor::WeightPages pages = infer::Predictor::WeightPages::Keep);
// "warning: FILE has no checksum ..." on stderr.
void warn_no_checksum(const std::string& path);
// --ema and --raw (excluding each other) into `ema` / `raw`.
void add_weight_flags(CLI::App* cmd, bool& ema, bool& raw);
// The weight set they ask for (Recorded when neither).
infer::WeightSet weight_set(bool ema, bool raw);

}  // namespace vit::cli
