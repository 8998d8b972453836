// Names read from files (tensor keys, zip entry names, pickle globals) as they may appear in an
// error or on a terminal: a hostile file's name must not move the cursor, clear the screen, end
// the line or cut the message at a NUL. printable() is the one door for every such name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vit {

// `name` with every byte a terminal could act on escaped as \xNN: control characters (NUL, ESC,
// CR, LF, ...), DEL, the C1 controls (U+0080..U+009F) and bytes that are not valid UTF-8; valid
// UTF-8 text passes through (as train/utf8.h writes class names that are not UTF-8: "caf\xE9").
// Longer than `max_bytes` bytes: cut at a character there, "..." and the full length appended
// ("abc... (5000 bytes)").
inline constexpr size_t kPrintableMaxBytes = 200;
std::string printable(std::string_view name, size_t max_bytes = kPrintableMaxBytes);

// A list for a message: the first `shown` items (each printable()), comma-separated, then
// "... and N more" when there are more: a file with 100k unexpected keys gives one short line.
inline constexpr size_t kListShown = 10;
std::string printable_list(const std::vector<std::string>& items, size_t shown = kListShown);
// The same for items that are printable already (each made with printable(), or by the program).
std::string short_list(const std::vector<std::string>& items, size_t shown = kListShown);

}  // namespace vit
