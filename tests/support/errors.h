// The message of the vit::Error a piece of code throws, for tests that pin error texts.
#pragma once

#include <functional>
#include <string>

#include "core/check.h"

namespace vit::testing {

// What fn throws as a vit::Error, or "(no error)" when it returns normally. Any other exception
// propagates (and fails the test): errors reaching the user must be vit::Errors.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace vit::testing
