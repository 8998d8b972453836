// vit::Error: what every part of vit throws on bad input, with an "[op] ..." prefix naming the
// operation and the offending file, key, shape or value. Public (the <vit/vit.h> facade and the
// library share it); derives from std::runtime_error.
#pragma once

#include <stdexcept>
#include <string>

namespace vit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace vit
