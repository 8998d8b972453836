// Options as a caller gave them, before any table reads them: names with their values as text.
// Every door fills one (a `vit` command's flags, the library's flag list, Python's keywords) and
// the room that declares the options turns it into its config with one set of checks and
// messages (train/train_options.h, infer/load_options.h).
#pragma once

#include <string>
#include <vector>

namespace vit {

// How the caller spells option names, for messages: "--batch-size" (flags) or "batch_size"
// (keywords).
enum class Spelling { Flags, Keywords };

struct OptionArgs {
  struct Given {
    std::string name;                 // "batch_size"
    std::vector<std::string> values;  // {"0.001"}; a flag alone: {"true"}; a list: several
  };
  std::vector<Given> given;  // in the order given; a name given twice: the last counts
  Spelling spelling = Spelling::Flags;

  void set(const std::string& name, std::vector<std::string> values);
  bool has(const std::string& name) const;
  const std::vector<std::string>& values(const std::string& name) const;  // the last given
  std::string what(const std::string& name) const;                        // "--lr" or "lr"
};

// How an option takes its values: Flag alone (true) or true/false; One value; a List of one or more.
enum class Arity { Flag, One, List };

}  // namespace vit
