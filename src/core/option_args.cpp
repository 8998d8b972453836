// Options as given (see option_args.h).
#include "core/option_args.h"

#include <algorithm>

#include "core/parse.h"

namespace vit {

void OptionArgs::set(const std::string& name, std::vector<std::string> values) {
  given.push_back({name, std::move(values)});
}

bool OptionArgs::has(const std::string& name) const {
  return std::any_of(given.begin(), given.end(), [&](const Given& g) { return g.name == name; });
}

const std::vector<std::string>& OptionArgs::values(const std::string& name) const {
  for (auto it = given.rbegin(); it != given.rend(); ++it) {
    if (it->name == name) return it->values;
  }
  static const std::vector<std::string> none;
  return none;
}

std::string OptionArgs::what(const std::string& name) const {
  return spelling == Spelling::Flags ? flag_of(name) : name;
}

}  // namespace vit
