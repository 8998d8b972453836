// UTF-8 checks (see utf8.h).
#include "train/utf8.h"

#include <fmt/format.h>

#include <cstdint>

namespace vit::train {
namespace {

// The length of the well-formed sequence starting at s[i], or 0 when there is none.
size_t sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t n = 0;
  uint32_t code = 0, smallest = 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2, code = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, code = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, code = lead & 0x07, smallest = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequence_length(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02X}", static_cast<uint8_t>(s[i]));
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::vector<std::string> escape_class_names(data::Dataset& d) {
  std::vector<std::string> escaped;
  for (std::string& name : d.class_names) {
    if (valid_utf8(name)) continue;
    name = escape_invalid_utf8(name);
    escaped.push_back(name);
  }
  return escaped;
}

}  // namespace vit::train
