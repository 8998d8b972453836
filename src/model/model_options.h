// The model options of `vit train`, `vit bench` and `vit info` (and of the library's and Python's
// training), declared once: each sets one ViTConfig field over a preset's value (--patch-size 4 on
// --preset vit_digits: the digits model in 4x4 patches). Every door builds its surface from this
// table: the command's flags ("--patch-size"), the facade's flag list, Python's keywords
// (patch_size=4). (`--heads` of predict / attention is a load option: infer/load_model.h.)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/vit_config.h"

namespace vit::model {

struct ModelOption {
  std::string name;      // keyword, "patch_size"; the flag is "--patch-size"
  std::string negation;  // toggles: the name that sets false ("no_qkv_bias"); "" otherwise
  std::string key;       // the ViTConfig JSON key (visit_fields) it sets
  std::string help;
  bool toggle = false;  // true/false: the flag alone means true
  std::string type;     // for --help: INT, FLOAT, TEXT ("" for a toggle)
  // Sets the field from text; `what` names the option as the caller spelled it, for messages
  // ("[train] --stem-layers: must be a whole number, got 'x'"; an empty value is refused).
  std::function<void(ViTConfig&, const std::string& text, const std::string& what)> set;
};

const std::vector<ModelOption>& model_options();
// The option called `name` (or whose negation it is; `negated` tells which); nullptr if none.
const ModelOption* find_model_option(const std::string& name, bool* negated = nullptr);

}  // namespace vit::model
