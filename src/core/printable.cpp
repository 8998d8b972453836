// printable, printable_list (see printable.h).
#include "core/printable.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace vit {
namespace {

// The length of the valid UTF-8 character at s[i] (1 to 4), or 0 when the bytes there are not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  uint32_t min = 0, code = 0;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80, code = c & 0x1f;
  if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800, code = c & 0x0f;
  if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000, code = c & 0x07;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (b(k) & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view name, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(name.size(), max_bytes) + 8);
  size_t i = 0;
  while (i < name.size() && i < max_bytes) {
    const auto c = static_cast<unsigned char>(name[i]);
    const size_t n = utf8_length(name, i);
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(name[i + 1]) < 0xa0;  // U+0080..U+009F
    if (n == 0 || c < 0x20 || c == 0x7f || c1) {
      out += fmt::format("\\x{:02X}", c);
      ++i;
    } else {
      out.append(name.substr(i, n));
      i += n;
    }
  }
  if (i < name.size()) out += fmt::format("... ({} bytes)", name.size());
  return out;
}

namespace {

template <typename Show>
std::string list(const std::vector<std::string>& items, size_t shown, Show show) {
  std::string out;
  for (size_t k = 0; k < items.size() && k < shown; ++k) {
    if (k > 0) out += ", ";
    out += show(items[k]);
  }
  if (items.size() > shown) out += fmt::format(", ... and {} more", items.size() - shown);
  return out;
}

}  // namespace

std::string printable_list(const std::vector<std::string>& items, size_t shown) {
  return list(items, shown, [](const std::string& item) { return printable(item); });
}

std::string short_list(const std::vector<std::string>& items, size_t shown) {
  return list(items, shown, [](const std::string& item) { return item; });
}

}  // namespace vit
