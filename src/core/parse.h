// Option values from text, checked, with one set of messages for every door: a `vit` flag
// ("--lr 0.001"), a library flag list, a Python keyword (lr=0.001). `what` names the option as the
// caller spelled it ("--batch-size" or "batch_size"); errors read
// "[op] --batch-size: must be a whole number, got 'x'".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vit {

// An option's flag from its name: "--batch-size" for "batch_size"; and back.
std::string flag_of(const std::string& name);
std::string name_of_flag(const std::string& flag);

// "true"/"false" (also "1"/"0"; any case).
bool parse_bool(const std::string& text, const char* op, const std::string& what);
// A whole number (no fraction, no trailing text), in [min, max].
int64_t parse_int(const std::string& text, const char* op, const std::string& what, int64_t min = INT64_MIN,
                  int64_t max = INT64_MAX);
// A whole number >= 0 up to 2^64 - 1 (seeds); "-1" is refused, never wrapped.
uint64_t parse_uint64(const std::string& text, const char* op, const std::string& what);
// A finite number in [min, max].
double parse_number(const std::string& text, const char* op, const std::string& what, double min = -1e308,
                    double max = 1e308);
// One of `choices`.
std::string parse_choice(const std::string& text, const char* op, const std::string& what,
                         const std::vector<std::string>& choices);

}  // namespace vit
