// The model flags of `vit train`, `vit bench` and `vit info`, in one table: each flag sets one
// ViTConfig field over the preset's value (--patch-size 4 on --preset vit_digits: the digits
// model in 4x4 patches). (`--heads` of predict / attention is another flag: see model_options.h.)
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
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
  int64_t heads_given() const { return heads_->count() > 0 ? values_.num_heads : 0; }
  // The preset `preset_name` with the given flags over it; named "custom" when flags were
  // given without an explicit --preset (`preset_given` false: `preset_name` is the command's default).
  model::ViTConfig config(const std::string& preset_name, bool preset_given) const;

 private:
  model::ViTConfig values_;  // what CLI11 parses the given flags into
  CLI::Option* heads_ = nullptr;
  std::vector<std::pair<CLI::Option*, std::function<void(model::ViTConfig&)>>> flags_;
  std::vector<std::string> keys_;  // flags_[i] sets the field with JSON key keys_[i]
};

}  // namespace vit::cli
