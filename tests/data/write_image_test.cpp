// Writing images (data::write_image, write_png) through the one rule for written files
// (core/output_file.h): whole files or nothing, Existing::Refuse keeps what is there, and errors
// name the file asked for, never a temporary file.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/image.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::data {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const Image kGrey{1, 4, 4, std::vector<uint8_t>(16, 90)};

TEST(WriteImage, ReplacesByDefaultRefusesWhenAskedAndLeavesNoTemporary) {
  testing::TempDir dir;
  const std::string file = dir.file("a.png");
  write_image(file, kGrey);
  write_image(file, Image{1, 8, 8, std::vector<uint8_t>(64, 10)});
  EXPECT_EQ(read_image(file).height, 8);
  EXPECT_EQ(error_of([&] { write_image(file, kGrey, Existing::Refuse); }),
            "[image] " + file + ": exists (written meanwhile by someone else; nothing replaced)");
  EXPECT_EQ(error_of([&] { write_png(file, kGrey, Existing::Refuse); }),
            "[image] " + file + ": exists (written meanwhile by someone else; nothing replaced)");
  EXPECT_EQ(read_image(file).height, 8);
  write_image(dir.file("b.bmp"), kGrey, Existing::Refuse);
  EXPECT_EQ(read_image(dir.file("b.bmp")).width, 4);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.png", "b.bmp"}));
}

TEST(WriteImage, ErrorsNameTheFile) {
  testing::TempDir dir;
  const std::string missing = dir.file("no/a.png");
  EXPECT_EQ(error_of([&] { write_image(missing, kGrey); }),
            "[image] " + missing + ": cannot write (No such file or directory)");
  const std::string folder = dir.file("folder.png");
  fs::create_directories(folder);
  EXPECT_EQ(error_of([&] { write_png(folder, kGrey); }), "[image] " + folder + ": is a directory");
  EXPECT_EQ(fs::directory_iterator(dir.path())->path(), folder);  // nothing else written
}

}  // namespace
}  // namespace vit::data
