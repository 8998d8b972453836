// The flags of the commands that load a model for inference (predict, embed, attention, serve;
// a subset for eval, quantize and convert): --checkpoint, the load options of infer's one table
// (infer/load_options.h: --layout, --heads, --eps, --act, --image-size, --no-strict, --ema,
// --raw, --allow-nonfinite, --resize, --crop, --interpolation, --mean, --std, --precision),
// --threads and --max-pixels. The load options keep the text given; infer reads it, with the
// checks and messages every door shares.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/option_args.h"
#include "infer/predictor.h"

namespace vit::cli {

struct LoadFlags {
  std::string checkpoint;
  int threads = 0;
  int64_t max_pixels = 0;
  // The load options registered (name in infer's table, its CLI11 option).
  std::vector<std::pair<std::string, CLI::Option*>> options;

  // The load options given, as text (core/option_args.h).
  OptionArgs given() const;
  bool given(const std::string& name) const;
  // What they say, through infer's table and checks.
  infer::LoadSettings settings() const;
};

// Registers the load options of infer's table named in `names` (all of them when empty).
void add_load_options(CLI::App* cmd, LoadFlags& flags, const std::vector<std::string>& names = {});
// --checkpoint, every load option, --threads and --max-pixels. (vit serve takes --model
// NAME=FILE too: require_checkpoint false.)
void add_model_flags(CLI::App* cmd, LoadFlags& flags, bool require_checkpoint = true);
// For bf16 on a CPU without AVX512_BF16, a note on stderr that the plain C++ emulation runs.
void note_precision(infer::Precision precision);
// Sets --threads, loads the model, and prints what was not loaded with --no-strict, a warning
// for a vit checkpoint without a checksum, and a note when --raw / --ema picks weights other than
// those the run evaluated ("note: FILE: raw weights (--raw); the run evaluated its EMA weights").
infer::LoadedModel load_model(const LoadFlags& flags);
// load_model behind the handle every door wraps, at the precision asked for.
infer::Predictor load_predictor(const LoadFlags& flags,
                                infer::Predictor::WeightPages pages = infer::Predictor::WeightPages::Keep);
// "warning: FILE has no checksum ..." on stderr.
void warn_no_checksum(const std::string& path);

}  // namespace vit::cli
