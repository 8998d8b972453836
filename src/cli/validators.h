// Flag value checks with short messages. CLI11's PositiveNumber / NonNegativeNumber print the
// whole double range ("Value 0 not in range 0.000000 to 1797693...(300 digits)"); these say
// what is wanted and what was given. CLI11 prefixes the flag: "--batch-size: must be ...".
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>
#include <thread>

namespace vit::cli {

namespace detail {
// The value as a finite number, or NaN when the text is not one.
inline double number_of(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() && std::isfinite(v) ? v : NAN;
  } catch (const std::exception&) {
    return NAN;
  }
}
}  // namespace detail

inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      const double v = detail::number_of(text);
      return std::isfinite(v) && v > 0 ? "" : "must be a positive number, got " + text;
    },
    "POSITIVE");

inline const CLI::Validator kNonNegative(
    [](std::string& text) -> std::string {
      const double v = detail::number_of(text);
      return std::isfinite(v) && v >= 0 ? "" : "must be a number >= 0, got " + text;
    },
    "NON-NEGATIVE");

// --seed: a whole number in [0, 2^64); "-1" would silently wrap to 2^64 - 1.
inline const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      return digits && text.size() <= 20 ? "" : "must be a whole number >= 0, got " + text;
    },
    "SEED");

// --threads: 0 (all cores) up to 1024; more is refused rather than silently capped.
inline constexpr int kMaxThreads = 1024;
inline const CLI::Validator kThreads(
    [](std::string& text) -> std::string {
      const double v = detail::number_of(text);
      if (std::isfinite(v) && v >= 0 && v <= kMaxThreads && v == std::floor(v)) return "";
      return "must be 0 (all " + std::to_string(std::thread::hardware_concurrency()) +
             " cores) or a thread count up to " + std::to_string(kMaxThreads) + ", got " + text;
    },
    "THREADS");

}  // namespace vit::cli
