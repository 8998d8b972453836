// The options of a training run, declared once for every door (after gemma.cpp's gemma_args.h,
// where one list drives both parsing and --help): name, help, the main job's default and how the
// text given sets TrainConfig. `vit train` builds its flags from this table (and the model options
// of model/model_options.h); the facade's train_model(flags) and Python's vit.train(**keywords)
// fill TrainArgs directly. make_train_config then applies the one set of rules every door shares:
// a preset brings its recipe and the options given apply over it, a length given replaces the time
// budget, other data gets its own normalisation, --resume continues in its own folder, ...
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/option_args.h"
#include "train/train_config.h"

namespace vit::train {

// What a caller gave (core/option_args.h): option names ("batch_size", model options too) with the
// values as text.
using TrainArgs = OptionArgs;
using vit::Spelling;

struct TrainOption {
  using Arity = vit::Arity;  // Flag: alone (true) or true/false; List: one or more values
  std::string name;          // keyword; the flag is "--" + name with '-' for '_'
  Arity arity = Arity::One;
  std::string help;
  std::string default_text;  // the main job's value, for --help ("" when none)
  std::string type;          // for --help: INT, FLOAT, TEXT, DURATION ("" for a flag)
  // Sets the option's field from its values (`what`: the option as spelled, for messages). Null for
  // the options make_train_config reads itself (preset, time_budget, resume, no_augment, plain).
  std::function<void(TrainConfig&, const std::vector<std::string>& values, const std::string& what)> set;
};

// Every training option but the model's (model::model_options()), in --help order.
const std::vector<TrainOption>& train_options();

// The TrainConfig a run is given: the recipe of --preset (default vit_hybrid_fashion), the options given
// over it, the model (the preset's, with the model options given), and what a resumed run checks
// (given_flags, given_model_fields). Throws "[train] --lr: must be a number, got 'x'", "[train]
// unknown option --lrr", "[train] --rotate excludes --no-augment", ... (TrainConfig::validate
// still runs when the run starts).
TrainConfig make_train_config(const TrainArgs& args);

// The flags of `vit train` as the library takes them ({"--data", "d", "--hflip", "--lr=0.1"}) into
// TrainArgs: "--name value...", "--name=value", a flag alone; "--no-x" for a model toggle's
// negation. Throws naming an unknown option or a value with no option.
TrainArgs parse_train_flags(const std::vector<std::string>& flags);

}  // namespace vit::train
