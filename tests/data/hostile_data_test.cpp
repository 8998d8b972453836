// What a hostile new user hands the dataset readers: empty splits (refused, naming the file),
// a directory with only one split's files (the missing files named), a truncated JPEG (said to
// be truncated), and splits whose class lists differ (mapped by name, unknown classes refused
// with both lists, classes without images reported).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/check.h"
#include "data/dataset.h"
#include "data/image.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::data {
namespace {

using testing::TempDir;

using testing::error_of;

std::vector<uint8_t> cifar_records(int n) {
  std::vector<uint8_t> bytes;
  for (int r = 0; r < n; ++r) {
    bytes.push_back(static_cast<uint8_t>(r % 10));
    for (int p = 0; p < 3072; ++p) bytes.push_back(static_cast<uint8_t>(p % 256));
  }
  return bytes;
}

// An IDX file may hold 0 images; a split of 0 images would train "1 epochs x 0 steps" and save
// random weights, or score nothing. Both splits are refused, naming the file.
TEST(HostileData, EmptySplitsAreRefusedNamingTheFile) {
  TempDir dir;
  testing::write_toy_mnist(dir.path(), 0, 0, 8);
  EXPECT_EQ(error_of([&] { load_dataset(dir.path(), Split::Train, 1, 8); }),
            "[data] " + dir.file("train-images-idx3-ubyte") + ": no images: the train split is empty");
  EXPECT_EQ(error_of([&] { load_dataset(dir.path(), Split::Test, 1, 8); }),
            "[data] " + dir.file("t10k-images-idx3-ubyte") + ": no images: the test split is empty");
  testing::write_toy_mnist(dir.path(), 5, 0, 8);
  EXPECT_EQ(load_dataset(dir.path(), Split::Train, 1, 8).size(), 5);
  EXPECT_NE(error_of([&] { load_dataset(dir.path(), Split::Test, 1, 8); }).find("the test split is empty"),
            std::string::npos);
}

// A directory holding one split's files names the other split's missing files instead of
// "not a dataset directory".
TEST(HostileData, MissingSplitFilesAreNamed) {
  TempDir idx;
  testing::write_toy_mnist(idx.path(), 5, 5, 8);
  std::filesystem::remove(idx.file("t10k-images-idx3-ubyte"));
  std::filesystem::remove(idx.file("t10k-labels-idx1-ubyte"));
  EXPECT_EQ(load_dataset(idx.path(), Split::Train, 1, 8).size(), 5);
  EXPECT_EQ(error_of([&] { load_dataset(idx.path(), Split::Test, 1, 8); }),
            "[data] " + idx.path() + ": found " + idx.file("train-images-idx3-ubyte") +
                " but no t10k-images-idx3-ubyte[.gz] for the test split");

  TempDir cifar;
  testing::write_bytes(cifar.file("test_batch.bin"), cifar_records(2));
  EXPECT_EQ(load_dataset(cifar.path(), Split::Test, 3, 32).size(), 2);
  EXPECT_EQ(error_of([&] { load_dataset(cifar.path(), Split::Train, 3, 32); }),
            "[data] " + cifar.path() + ": found test_batch.bin but no data_batch_1.bin for the train split");
  std::filesystem::rename(cifar.file("test_batch.bin"), cifar.file("data_batch_1.bin"));
  EXPECT_EQ(error_of([&] { load_dataset(cifar.path(), Split::Test, 3, 32); }),
            "[data] " + cifar.path() + ": found data_batch_1.bin but no test_batch.bin for the test split");

  TempDir folders;
  std::filesystem::create_directories(folders.file("train/a"));
  write_png(folders.file("train/a/1.png"), Image{1, 4, 4, std::vector<uint8_t>(16, 9)});
  EXPECT_EQ(error_of([&] { load_dataset(folders.path(), Split::Test, 1, 4); }),
            "[data] " + folders.path() + ": found " + folders.file("train") +
                "/ but no test (or val)/ folder for the test split");
}

// A JPEG cut short reported "0x0 = 0 pixels exceeds the limit": it says it is truncated.
TEST(HostileData, TruncatedJpegSaysSo) {
  // (Built in steps: GCC 12 warns falsely (-Warray-bounds) on string(macro) + literal here.)
  std::string file = VIT_GOLDEN_DIR;
  file.append("/../fuzz/corpus/image/seed_baseline.jpg");
  const std::vector<uint8_t> jpeg = testing::read_bytes(file);
  ASSERT_GT(jpeg.size(), 400u);
  EXPECT_EQ(decode_image(jpeg.data(), jpeg.size(), "whole.jpg").height, 9);
  for (size_t cut : {size_t{2}, size_t{11}, size_t{100}, size_t{300}, jpeg.size() / 2, jpeg.size() - 2}) {
    const std::string e = error_of([&] { decode_image(jpeg.data(), cut, "cut.jpg"); });
    EXPECT_NE(e.find("[image] cut.jpg: cannot decode (truncated JPEG"), std::string::npos) << cut << ": " << e;
    EXPECT_EQ(e.find("exceeds the limit"), std::string::npos) << cut << ": " << e;
  }
}

// A PNG whose chunk claims more bytes than the file holds (found by fuzz_oip_image: stb grew its
// IDAT buffer to the claimed 1 GiB before reading it) is refused before stb sees it; a whole PNG
// and one cut inside its data still decode or fail as before.
TEST(HostileData, APngChunkPastTheEndIsRefusedBeforeDecoding) {
  const std::vector<uint8_t> png = encode_png(Image{3, 5, 6, std::vector<uint8_t>(90, 77)});
  EXPECT_EQ(decode_image(png.data(), png.size(), "whole.png").width, 6);
  std::vector<uint8_t> hostile = png;
  // The first chunk after the signature is IHDR (13 bytes); the next one's length field follows.
  const size_t second = 8 + 8 + 13 + 4;
  hostile[second] = 0x40;  // 0x40xxxxxx bytes: ~1 GiB
  const std::string e = error_of([&] { decode_image(hostile.data(), hostile.size(), "hostile.png"); });
  EXPECT_NE(e.find("[image] hostile.png: cannot decode (a PNG chunk at byte 33 says"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end of the"), std::string::npos) << e;
  const std::string cut = error_of([&] { decode_image(png.data(), png.size() - 20, "cut.png"); });
  EXPECT_NE(cut.find("[image] cut.png: cannot decode"), std::string::npos) << cut;
}

Dataset labelled(std::vector<std::string> names, std::vector<int64_t> labels) {
  Dataset d;
  d.channels = d.height = d.width = 1;
  d.pixels.assign(labels.size(), 0);
  d.labels = std::move(labels);
  d.class_names = std::move(names);
  d.source = "data/test";
  return d;
}

// Labels were each split's position in its own sorted folder list: test/{a,c} beside
// train/{a,b,c} scored c as b. They are mapped by name onto the known (training) list.
TEST(HostileData, ClassesAreMappedByName) {
  const std::vector<std::string> known = {"a", "b", "c"};
  Dataset subset = labelled({"a", "c"}, {0, 1, 1, 0});
  EXPECT_EQ(map_classes(subset, known, "the training split"), (std::vector<std::string>{"b"}));
  EXPECT_EQ(subset.labels, (std::vector<int64_t>{0, 2, 2, 0}));
  EXPECT_EQ(subset.class_names, known);

  Dataset reordered = labelled({"c", "b", "a"}, {0, 1, 2});
  EXPECT_TRUE(map_classes(reordered, known, "the training split").empty());
  EXPECT_EQ(reordered.labels, (std::vector<int64_t>{2, 1, 0}));

  Dataset same = labelled(known, {2, 2});  // same list: labels kept, empty classes reported
  EXPECT_EQ(map_classes(same, known, "x"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(same.labels, (std::vector<int64_t>{2, 2}));

  Dataset unknown = labelled({"a", "d", "e"}, {0, 1, 2});
  EXPECT_EQ(error_of([&] { map_classes(unknown, known, "the checkpoint run/last.safetensors"); }),
            "[data] data/test: classes 'd', 'e' are not among the classes of the checkpoint run/last.safetensors: "
            "[a, b, c]; the data's classes are [a, d, e]");
  EXPECT_EQ(unknown.labels, (std::vector<int64_t>{0, 1, 2})) << "a refused mapping changes nothing";
  Dataset one_unknown = labelled({"d"}, {0});
  EXPECT_NE(error_of([&] { map_classes(one_unknown, known, "x"); }).find("class 'd' is not among the classes of x"),
            std::string::npos);
  Dataset twice = labelled({"b"}, {0});
  EXPECT_NE(error_of([&] { map_classes(twice, {"a", "b", "a"}, "x"); }).find("name 'a' twice"), std::string::npos);
  Dataset bad_label = labelled({"a"}, {3});
  EXPECT_NE(error_of([&] { map_classes(bad_label, known, "x"); }).find("label 3 is not one of its 1 classes"),
            std::string::npos);
}

}  // namespace
}  // namespace vit::data
