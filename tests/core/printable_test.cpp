// core/printable.h: names from files made safe for a terminal and short enough for one line.
#include "core/printable.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vit {
namespace {

TEST(Printable, PlainAndUtf8NamesPassThrough) {
  EXPECT_EQ(printable("blocks.0.attn.qkv.weight"), "blocks.0.attn.qkv.weight");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, ControlBytesDelAndBadUtf8AreEscaped) {
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\x1b[2J\r\nx\x7f"), "\\x1B[2J\\x0D\\x0Ax\\x7F");
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\xC2\\x9B31m");                                                   // C1 CSI, as UTF-8
  EXPECT_EQ(printable("\xff\xc3(\xe0\x80\x80"), "\\xFF\\xC3(\\xE0\\x80\\x80");  // invalid, overlong
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xED\\xA0\\x80");                      // a surrogate
  EXPECT_EQ(printable("caf\\xE9"), "caf\\xE9");  // a class name train/utf8.h escaped already
}

TEST(Printable, LongNamesAreCut) {
  const std::string longest(5000, 'k');
  std::string cut_at_200(kPrintableMaxBytes, 'k');
  cut_at_200.append("... (5000 bytes)");
  EXPECT_EQ(printable(longest), cut_at_200);
  EXPECT_EQ(printable(std::string(kPrintableMaxBytes, 'k')), std::string(kPrintableMaxBytes, 'k'));
  // Never inside a character.
  std::string accents;
  for (int i = 0; i < 150; ++i) accents += "\xc3\xa9";
  const std::string cut = printable(accents);
  EXPECT_EQ(cut.substr(0, 200), accents.substr(0, 200));
  EXPECT_EQ(cut.substr(200), "... (300 bytes)");
}

TEST(Printable, ListsShowTheFirstTen) {
  std::vector<std::string> keys;
  for (int i = 0; i < 100000; ++i) keys.push_back("k" + std::to_string(i));
  const std::string shown = printable_list(keys);
  EXPECT_EQ(shown, "k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, ... and 99990 more");
  EXPECT_EQ(printable_list({"a", "b\n"}), "a, b\\x0A");
  EXPECT_EQ(printable_list({}), "");
}

}  // namespace
}  // namespace vit
