// The model flags of `vit bench` and `vit info`: model::model_options() as CLI11 flags, each
// setting one ViTConfig field over the preset's value. (`vit train` takes them through
// train::train_options; `--heads` of predict / attention is a load option: see model_options.h.)
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "model/vit_config.h"

namespace vit::cli {

class ModelFlags {
 public:
  // Registers the flags on `cmd`. CLI11 parses into this object: keep it alive (a shared_ptr
  // captured by the command's callback) until the callback has run.
  explicit ModelFlags(CLI::App& cmd);
  ModelFlags(const ModelFlags&) = delete;
  ModelFlags& operator=(const ModelFlags&) = delete;

  // Whether any model flag was given.
  bool given() const;
  // Whether `option` is one of the model flags.
  bool contains(const CLI::Option* option) const;
  // The ViTConfig JSON keys (visit_fields names) of the flags given, e.g. {"dim", "dropout"}.
  std::vector<std::string> given_fields() const;
  // Refuses (CLI11's "--dim excludes --checkpoint") any model flag but `allowed` together with `option`.
  void exclude(CLI::Option* option, const std::string& allowed = "");
  // --heads' value when given (0 otherwise).
  int64_t heads_given() const;
  // The preset `preset_name` with the given flags over it; named "custom" when flags were
  // given without an explicit --preset (`preset_given` false: `preset_name` is the command's default).
  model::ViTConfig config(const std::string& preset_name, bool preset_given) const;

 private:
  // flags_[i] is the CLI11 option of model::model_options()[i] (its results: the text given).
  std::vector<CLI::Option*> flags_;
};

}  // namespace vit::cli
