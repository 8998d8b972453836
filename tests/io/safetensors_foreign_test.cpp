// Files of another kind given as safetensors (a PNG, a PyTorch zip or pickle, a text file) are
// named as such -- "not a safetensors file (it is a PNG image)" -- instead of reporting their
// first 8 bytes as a 7e17-byte header; a real safetensors file with a bad length is still
// diagnosed as one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"

namespace vit::io {
namespace {

using namespace vit::io::test;
using ::testing::HasSubstr;

// Other kinds of file are named, not read as a header length (a PNG's first 8 bytes give 7e17).
TEST_F(SafetensorsTest, FilesOfAnotherKindAreNamed) {
  auto refused = [&](const std::string& bytes, const std::string& name) {
    const std::string file = path(name);
    write_file(file, bytes);
    return error_of([&] { load_safetensors(file); });
  };
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::string(40, '\0');
  const std::string e1 = refused(png, "photo.png");
  EXPECT_THAT(e1, HasSubstr("[safetensors] " + path("photo.png") + ": not a safetensors file (it is a PNG image)"));
  EXPECT_THAT(e1, ::testing::Not(HasSubstr("header length")));
  EXPECT_THAT(refused(std::string("PK\x03\x04\x14\0\0\0", 8) + std::string(100, 'x'), "model.pth"),
              HasSubstr("not a safetensors file (it is a zip archive, as PyTorch .pth/.bin and NumPy .npz files "
                        "are: vit predict, eval and the other model commands read those"));
  EXPECT_THAT(refused("\x80\x04\x95"
                      "abcdefghijklmnop",
                      "old.pt"),
              HasSubstr("a Python pickle"));
  EXPECT_THAT(refused("This is a text file, not a tensor file.\n", "notes.txt"),
              HasSubstr("not a safetensors file (its first 8 bytes, read as the header length, give "));
  // A safetensors file whose header length is wrong is still diagnosed as one.
  EXPECT_THAT(refused(u64_le(1000) + "{}", "cut.safetensors"), HasSubstr("header length 1000 is longer than the file"));
}

}  // namespace
}  // namespace vit::io
