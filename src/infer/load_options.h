// The options of loading a model, declared once for every door (as train/train_options.h declares
// the training options): name, arity, type and help, and how the text given sets the public
// struct <vit/load_options.h>. `vit predict` and the other model commands build their flags from
// this table, Python's vit.load(**keywords) hands it its keywords, and the C++ door fills the
// struct itself; every path then goes through resolve_load_options, the one set of checks and
// messages ("[load] --heads: must be a whole number >= 1, got 0", "[load] eps must be a positive
// number (0: the file's), got -1"), into the LoadSettings the loaders read.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/option_args.h"
#include "infer/preprocess.h"
#include "infer/request.h"
#include "model/layouts/layout.h"
#include "vit/load_options.h"

namespace vit::infer {

using checkpoint::WeightSet;  // Recorded (what the run evaluated), Raw, Ema

// The load options resolved: what load_model and the model handle read.
struct LoadSettings {
  std::optional<model::Layout> layout;  // detected when not given
  int64_t num_heads = 0;                // 0: from metadata, else the standard value for a standard width
  std::optional<double> eps;            // LayerNorm eps; default follows the layout
  std::optional<std::string> act;       // MLP activation; default follows the family (OpenAI CLIP: quick_gelu)
  int64_t image_size = 0;               // > 0: run at this resolution (pos_embed resampled)
  bool strict = true;                   // refuse missing / unexpected keys
  // Our checkpoints: which weights; by default those the run evaluated (its EMA weights when it
  // evaluated those). Ema on a file without EMA weights (foreign, int8, trained without) is refused.
  WeightSet weights = WeightSet::Recorded;
  bool allow_nonfinite = false;  // load weights holding NaN/Inf (refused by default)
  // Preprocessing over the checkpoint's own evaluation transform (vit predict's --resize, --crop,
  // --interpolation, --mean, --std): checked against the model's channels when it is loaded.
  int64_t resize = 0;                    // > 0: resize the shorter side to this
  int64_t crop = -1;                     // >= 0: center crop to this (0: no crop)
  std::optional<Filter> interpolation;   // bilinear or bicubic
  std::vector<double> mean, std;         // one value for every channel, or one per channel
  Precision precision = Precision::F32;  // the inference session's Linear layers
};

struct LoadOption {
  std::string name;  // keyword and field of vit::LoadOptions; the flag is "--" + name with '-' for '_'
  Arity arity = Arity::One;
  std::string type;  // for --help: INT, FLOAT, TEXT ("" for a flag)
  std::string help;
  std::string negation;  // a flag whose default is true is given as its negation ("no_strict")
  // Sets the option's field from its values (`what`: the option as spelled, for messages).
  std::function<void(vit::LoadOptions&, const std::vector<std::string>& values, const std::string& what)> set;
};

// Every load option, in --help order.
const std::vector<LoadOption>& load_option_table();
// The option of this name (nullptr when there is none).
const LoadOption* find_load_option(const std::string& name);

// The options given, read into the public struct: "[load] unknown option --hedas (known: ...)",
// "[load] --heads: must be a whole number >= 1, got 0".
vit::LoadOptions read_load_options(const OptionArgs& args);
// The one set of checks, then the settings: ema and raw exclude each other, a known layout,
// activation, interpolation and precision, eps and sizes in range.
LoadSettings resolve_load_options(const vit::LoadOptions& options, Spelling spelling);
// Both: the settings of the options given.
LoadSettings make_load_settings(const OptionArgs& args);

}  // namespace vit::infer
