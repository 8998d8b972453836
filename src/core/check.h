// Errors and checks. Public functions validate their inputs and throw vit::Error with an
// "[op] ..." prefix naming the operation and the offending shapes/values (ARCHITECTURE.md,
// convention 6). Internal invariants use VIT_ASSERT, which also throws (never UB).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "vit/error.h"  // vit::Error, public (include/vit)

namespace vit {

// Throws Error("[op] message") built with fmt.
template <typename... Args>
[[noreturn]] void fail(const char* op, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format("[{}] {}", op, fmt::format(format, std::forward<Args>(args)...)));
}

// A double for messages: "nan" (never "-nan"), "inf", "-inf", or the shortest round-trip form.
inline std::string number_str(double v) {
  if (v != v) return "nan";
  return fmt::format("{}", v);
}

}  // namespace vit

// VIT_CHECK(cond, "op", "format {}", args...): throws vit::Error when cond is false.
#define VIT_CHECK(cond, op, ...)               \
  do {                                         \
    if (!(cond)) ::vit::fail(op, __VA_ARGS__); \
  } while (0)

#define VIT_ASSERT(cond) VIT_CHECK(cond, "internal", "assertion failed: {} ({}:{})", #cond, __FILE__, __LINE__)
