// A classes.txt naming a class twice is refused when the data is read: predictions name one
// class, and a checkpoint with repeated class names would not load (found at the first save).
#include <gtest/gtest.h>

#include "core/check.h"
#include "data/dataset.h"
#include "support/files.h"

namespace vit::data {
namespace {

TEST(Mnist, RepeatedClassNamesAreRefused) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 20, 10, 8);
  const std::string text = "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\none\nnine\n";
  testing::write_bytes(dir.file("classes.txt"), std::vector<uint8_t>(text.begin(), text.end()));
  std::string e = "(no error)";
  try {
    load_dataset(dir.path(), Split::Train, 1, 8);
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_EQ(e, "[data] " + dir.file("classes.txt") + ": class name 'one' appears twice (one different name per line)");
}

}  // namespace
}  // namespace vit::data
