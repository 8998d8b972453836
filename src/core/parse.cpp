// Option values from text (see parse.h).
#include "core/parse.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace vit {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool all_digits(const std::string& s, size_t from) {
  return s.size() > from && std::all_of(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(),
                                        [](char c) { return c >= '0' && c <= '9'; });
}

// The bound for messages: whole bounds without a fraction, the widest ones not at all.
std::string range_str(double min, double max) {
  const bool no_min = min <= -1e300, no_max = max >= 1e300;
  if (no_min && no_max) return "";
  if (no_max) return fmt::format(" >= {}", number_str(min));
  if (no_min) return fmt::format(" <= {}", number_str(max));
  return fmt::format(" in [{}, {}]", number_str(min), number_str(max));
}

}  // namespace

std::string flag_of(const std::string& name) {
  std::string flag = "--" + name;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

std::string name_of_flag(const std::string& flag) {
  std::string name = flag.rfind("--", 0) == 0 ? flag.substr(2) : flag;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

bool parse_bool(const std::string& text, const char* op, const std::string& what) {
  const std::string t = lower(text);
  if (t == "true" || t == "1") return true;
  if (t == "false" || t == "0") return false;
  fail(op, "{}: takes true or false, got '{}'", what, text);
}

int64_t parse_int(const std::string& text, const char* op, const std::string& what, int64_t min, int64_t max) {
  const bool ok = all_digits(text, text.rfind('-', 0) == 0 || text.rfind('+', 0) == 0 ? 1 : 0) && text.size() <= 19;
  const std::string range = range_str(min == INT64_MIN ? -1e308 : static_cast<double>(min),
                                      max == INT64_MAX ? 1e308 : static_cast<double>(max));
  VIT_CHECK(ok, op, "{}: must be a whole number{}, got '{}'", what, range, text);
  const int64_t v = std::stoll(text);
  VIT_CHECK(v >= min && v <= max, op, "{}: must be a whole number{}, got {}", what, range, v);
  return v;
}

uint64_t parse_uint64(const std::string& text, const char* op, const std::string& what) {
  bool ok = all_digits(text, 0) && text.size() <= 20;
  uint64_t v = 0;
  if (ok) {
    try {
      v = std::stoull(text);
    } catch (const std::exception&) {
      ok = false;  // beyond 2^64 - 1
    }
  }
  VIT_CHECK(ok, op, "{}: must be a whole number >= 0, got {}", what, text);
  return v;
}

double parse_number(const std::string& text, const char* op, const std::string& what, double min, double max) {
  double v = std::numeric_limits<double>::quiet_NaN();
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = std::numeric_limits<double>::quiet_NaN();
  } catch (const std::exception&) {
  }
  VIT_CHECK(std::isfinite(v), op, "{}: must be a{} number{}, got '{}'", what, std::isinf(v) ? " finite" : "",
            range_str(min, max), text);
  VIT_CHECK(v >= min && v <= max, op, "{}: must be a number{}, got {}", what, range_str(min, max), text);
  return v;
}

std::string parse_choice(const std::string& text, const char* op, const std::string& what,
                         const std::vector<std::string>& choices) {
  VIT_CHECK(std::find(choices.begin(), choices.end(), text) != choices.end(), op, "{}: must be one of {}, got '{}'",
            what, fmt::join(choices, ", "), text);
  return text;
}

}  // namespace vit
