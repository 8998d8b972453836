// The shared model flags (see model_flags.h).
#include "cli/model_flags.h"

#include "core/parse.h"
#include "model/model_options.h"

namespace vit::cli {

ModelFlags::ModelFlags(CLI::App& cmd) {
  for (const model::ModelOption& o : model::model_options()) {
    if (o.toggle) {
      flags_.push_back(cmd.add_flag(flag_of(o.name) + ",!" + flag_of(o.negation)));
    } else {
      flags_.push_back(cmd.add_option(flag_of(o.name)));
    }
    flags_.back()->description(o.help)->type_name(o.type);
  }
}

std::vector<std::string> ModelFlags::given_fields() const {
  std::vector<std::string> keys;
  for (size_t i = 0; i < flags_.size(); ++i) {
    if (flags_[i]->count() > 0) keys.push_back(model::model_options()[i].key);
  }
  return keys;
}

bool ModelFlags::given() const {
  for (const CLI::Option* option : flags_) {
    if (option->count() > 0) return true;
  }
  return false;
}

bool ModelFlags::contains(const CLI::Option* option) const {
  for (const CLI::Option* flag : flags_) {
    if (flag == option) return true;
  }
  return false;
}

void ModelFlags::exclude(CLI::Option* option, const std::string& allowed) {
  for (CLI::Option* flag : flags_) {
    if (flag->get_name() != allowed) flag->excludes(option);
  }
}

int64_t ModelFlags::heads_given() const {
  model::ViTConfig c;
  c.num_heads = 0;
  for (size_t i = 0; i < flags_.size(); ++i) {
    const model::ModelOption& o = model::model_options()[i];
    if (o.name == "heads" && flags_[i]->count() > 0) o.set(c, flags_[i]->results().back(), "--heads");
  }
  return c.num_heads;
}

model::ViTConfig ModelFlags::config(const std::string& preset_name, bool preset_given) const {
  model::ViTConfig c = model::preset(preset_name);
  for (size_t i = 0; i < flags_.size(); ++i) {
    const model::ModelOption& o = model::model_options()[i];
    if (flags_[i]->count() > 0) o.set(c, flags_[i]->results().back(), flags_[i]->get_name());
  }
  if (given() && !preset_given) c.name = "custom";
  return c;
}

}  // namespace vit::cli
