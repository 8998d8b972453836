// Inputs that used to give a library's wording or pass without a word (#29, finding 14): a CMYK
// JPEG decodes (converted to RGB as Pillow does), an empty file says it is empty, and the entries
// of an image folder that are not image files are counted and named.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include <filesystem>

#include "data/dataset.h"
#include "data/image.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::data {
namespace {

// A CMYK JPEG as libjpeg-turbo writes one (with Adobe's APP14 marker: inks stored inverted).
std::vector<uint8_t> cmyk_jpeg(const std::vector<uint8_t>& cmyk, int w, int h) {
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(handle, cmyk.data(), w, 0, h, TJPF_CMYK, &jpeg, &size, TJSAMP_444, 100, TJFLAG_ACCURATEDCT), 0)
      << tjGetErrorStr2(handle);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

TEST(OddInputs, ACmykJpegDecodesToRgbAsPillowConvertsIt) {
  const int w = 8, h = 8;
  // Stored values (Adobe-inverted inks): a flat colour per half of the image.
  std::vector<uint8_t> cmyk(static_cast<size_t>(4 * w * h));
  for (int i = 0; i < w * h; ++i) {
    const bool left = i % w < w / 2;
    const uint8_t px[4] = {static_cast<uint8_t>(left ? 255 : 100), static_cast<uint8_t>(left ? 128 : 200),
                           static_cast<uint8_t>(left ? 0 : 50), static_cast<uint8_t>(left ? 255 : 200)};
    std::copy(px, px + 4, cmyk.begin() + 4 * i);
  }
  const std::vector<uint8_t> jpeg = cmyk_jpeg(cmyk, w, h);
  const Image image = decode_image(jpeg.data(), jpeg.size(), "cmyk.jpg");
  ASSERT_EQ(image.channels, 3);
  ASSERT_EQ(image.height, h);
  ASSERT_EQ(image.width, w);
  // R = stored_C * stored_K / 255 for inverted inks (Pillow's CMYK -> RGB on an Adobe JPEG).
  auto at = [&](int ch, int y, int x) { return static_cast<int>(image.pixels[(ch * h + y) * w + x]); };
  EXPECT_NEAR(at(0, 4, 1), 255, 3);
  EXPECT_NEAR(at(1, 4, 1), 128, 3);
  EXPECT_NEAR(at(2, 4, 1), 0, 3);
  EXPECT_NEAR(at(0, 4, 6), 100 * 200 / 255, 3);
  EXPECT_NEAR(at(1, 4, 6), 200 * 200 / 255, 3);
  EXPECT_NEAR(at(2, 4, 6), 50 * 200 / 255, 3);
}

TEST(OddInputs, AnEmptyImageFileSaysItIsEmpty) {
  testing::TempDir dir;
  testing::write_bytes(dir.file("empty.png"), {});
  EXPECT_EQ(testing::error_of([&] { read_image(dir.file("empty.png")); }),
            "[image] " + dir.file("empty.png") + ": the file is empty (0 bytes)");
}

TEST(OddInputs, EntriesOfAnImageFolderThatAreNotImageFilesAreCountedAndNamed) {
  testing::TempDir dir;
  namespace fs = std::filesystem;
  for (const char* split : {"train", "test"}) {
    const fs::path cls = fs::path(dir.file("data")) / split / "cat";
    fs::create_directories(cls);
    write_png((cls / "a.png").string(), Image{1, 4, 4, std::vector<uint8_t>(16, 7)});
  }
  const fs::path cls = fs::path(dir.file("data")) / "train" / "cat";
  fs::create_symlink(cls / "missing.png", cls / "dangling.png");
  fs::create_directories(cls / "folder.png");
  ASSERT_EQ(::mkfifo((cls / "pipe.png").c_str(), 0600), 0);
  testing::write_bytes((cls / "notes.txt").string(), {'x'});
  const Dataset d = load_dataset(dir.file("data"), Split::Train, 1, 4);
  EXPECT_EQ(d.size(), 1);
  EXPECT_EQ(d.skipped.size(), 4u);
  const std::string note = skipped_note(d);
  EXPECT_NE(note.find("skipped 4 entries of the class folders that are not image files"), std::string::npos) << note;
  EXPECT_EQ(skipped_note(load_dataset(dir.file("data"), Split::Test, 1, 4)), "");
}

}  // namespace
}  // namespace vit::data
