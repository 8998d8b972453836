// Dataset readers on small generated files: MNIST IDX (raw, gzip, corrupt), CIFAR-10 binary,
// image folders, and the dataset-directory detection, with the error each bad file gives.
#include "data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "core/check.h"
#include "data/image.h"
#include "support/errors.h"
#include "support/files.h"

namespace vit::data {
namespace {

using testing::TempDir;

using testing::error_of;

TEST(Mnist, ReadsRawAndGzipIdx) {
  TempDir dir;
  const auto images = testing::idx_images(3, 4, 5);
  const auto labels = testing::idx_labels({7, 0, 9});
  testing::write_bytes(dir.file("i"), images);
  testing::write_bytes(dir.file("l"), labels);
  testing::write_bytes(dir.file("i.gz"), testing::gzip(images));
  testing::write_bytes(dir.file("l.gz"), testing::gzip(labels));
  for (const auto& [i, l] : {std::pair{"i", "l"}, {"i.gz", "l.gz"}}) {
    const Dataset d = load_mnist_idx(dir.file(i), dir.file(l));
    EXPECT_EQ(d.size(), 3);
    EXPECT_EQ(d.channels, 1);
    EXPECT_EQ(d.height, 4);
    EXPECT_EQ(d.width, 5);
    EXPECT_EQ(d.labels, (std::vector<int64_t>{7, 0, 9}));
    EXPECT_EQ(d.image(2)[3], (2 * 7 + 3) % 256);
    EXPECT_EQ(d.num_classes(), 10);
  }
}

TEST(Mnist, BadFilesNameTheFileAndProblem) {
  TempDir dir;
  auto images = testing::idx_images(3, 4, 5);
  const auto labels = testing::idx_labels({7, 0, 9});
  testing::write_bytes(dir.file("l"), labels);
  auto wrong_magic = images;
  wrong_magic[3] = 0x01;
  testing::write_bytes(dir.file("magic"), wrong_magic);
  EXPECT_EQ(error_of([&] { load_mnist_idx(dir.file("magic"), dir.file("l")); }),
            "[mnist] " + dir.file("magic") + ": wrong magic number 0x00000801 (expected 0x00000803 for images)");
  auto truncated = images;
  truncated.resize(truncated.size() - 7);
  testing::write_bytes(dir.file("short"), truncated);
  EXPECT_EQ(error_of([&] { load_mnist_idx(dir.file("short"), dir.file("l")); }),
            "[mnist] " + dir.file("short") + ": header says 3 images of 4x5 (60 bytes) but the file has 53");
  testing::write_bytes(dir.file("tiny"), {0, 0, 8});
  EXPECT_NE(error_of([&] { load_mnist_idx(dir.file("tiny"), dir.file("l")); }).find("too short"), std::string::npos);
  testing::write_bytes(dir.file("i"), images);
  testing::write_bytes(dir.file("l2"), testing::idx_labels({1, 2}));
  EXPECT_NE(error_of([&] { load_mnist_idx(dir.file("i"), dir.file("l2")); }).find("has 3 images but"),
            std::string::npos);
  testing::write_bytes(dir.file("l11"), testing::idx_labels({1, 11, 2}));
  EXPECT_NE(error_of([&] { load_mnist_idx(dir.file("i"), dir.file("l11")); }).find("label 11 at index 1"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { load_mnist_idx(dir.file("missing"), dir.file("l")); }),
            "[mnist] " + dir.file("missing") + ": no such file");
  auto gz = testing::gzip(images);
  gz.resize(gz.size() / 2);
  testing::write_bytes(dir.file("cut.gz"), gz);
  EXPECT_NE(error_of([&] { load_mnist_idx(dir.file("cut.gz"), dir.file("l")); }).find("truncated"), std::string::npos);
  auto garbage = testing::gzip(images);
  for (size_t k = 12; k < garbage.size() - 8; ++k) garbage[k] ^= 0x5a;
  testing::write_bytes(dir.file("bad.gz"), garbage);
  EXPECT_NE(error_of([&] { load_mnist_idx(dir.file("bad.gz"), dir.file("l")); }).find(dir.file("bad.gz")),
            std::string::npos);
}

// IDX files carry no class names: a classes.txt beside them (Fashion-MNIST's, say) names them;
// a file naming a different number of classes is refused with both counts.
// A subset keeps the image shape and class names and takes the chosen images in order.
TEST(Subset, TakesTheChosenImagesInOrder) {
  testing::TempDir dir;
  testing::write_toy_mnist(dir.path(), 20, 10, 8);
  const Dataset d = load_dataset(dir.path(), Split::Train, 1, 8);
  const Dataset s = subset(d, {7, 2, 7}, "part");
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.source, "part");
  EXPECT_EQ(s.class_names, d.class_names);
  EXPECT_EQ(std::make_tuple(s.channels, s.height, s.width), std::make_tuple(d.channels, d.height, d.width));
  EXPECT_EQ(s.labels, (std::vector<int64_t>{d.labels[7], d.labels[2], d.labels[7]}));
  EXPECT_TRUE(std::equal(s.image(1), s.image(1) + 64, d.image(2)));
  EXPECT_TRUE(std::equal(s.image(2), s.image(2) + 64, d.image(7)));
  EXPECT_EQ(subset(d, {}, "none").size(), 0);
  EXPECT_THROW(subset(d, {20}, "x"), Error);
  EXPECT_THROW(subset(d, {-1}, "x"), Error);
}

TEST(Mnist, ClassNamesComeFromClassesTxt) {
  TempDir dir;
  testing::write_toy_mnist(dir.path(), 20, 10, 8);
  EXPECT_EQ(load_dataset(dir.path(), Split::Train, 1, 8).class_names[3], "3");  // default: the digits
  const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  std::string text;
  for (const auto& n : names) text += n + "\r\n";  // CRLF and a trailing blank line are fine
  text += "\n";
  testing::write_bytes(dir.file("classes.txt"), std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_EQ(load_dataset(dir.path(), Split::Train, 1, 8).class_names, names);
  EXPECT_EQ(load_dataset(dir.path(), Split::Test, 1, 8).class_names, names);
  const std::string nine = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
  testing::write_bytes(dir.file("classes.txt"), std::vector<uint8_t>(nine.begin(), nine.end()));
  const std::string e = error_of([&] { load_dataset(dir.path(), Split::Train, 1, 8); });
  EXPECT_NE(e.find("classes.txt: 9 class names, but"), std::string::npos) << e;
  EXPECT_NE(e.find("has 10 classes"), std::string::npos) << e;
}

TEST(Cifar10, ReadsRecordsAndRefusesWrongLengths) {
  TempDir dir;
  std::vector<uint8_t> bytes;
  for (int r = 0; r < 2; ++r) {
    bytes.push_back(static_cast<uint8_t>(r * 5));
    for (int p = 0; p < 3072; ++p) bytes.push_back(static_cast<uint8_t>((p + r) % 256));
  }
  testing::write_bytes(dir.file("data_batch_1.bin"), bytes);
  const Dataset d = load_cifar10({dir.file("data_batch_1.bin")});
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.image(1)[1024], (1024 + 1) % 256);  // first green pixel of record 1
  EXPECT_EQ(d.class_names[5], "dog");
  bytes.pop_back();
  testing::write_bytes(dir.file("bad.bin"), bytes);
  EXPECT_EQ(error_of([&] { load_cifar10({dir.file("bad.bin")}); }),
            "[cifar10] " + dir.file("bad.bin") +
                ": 6145 bytes is not a whole number of 3073-byte records (label + 3x32x32 pixels)");
  // Dataset-directory detection finds CIFAR batches.
  std::filesystem::copy_file(dir.file("data_batch_1.bin"), dir.file("test_batch.bin"));
  EXPECT_EQ(load_dataset(dir.path(), Split::Train, 3, 32).size(), 2);
  EXPECT_EQ(load_dataset(dir.path(), Split::Test, 3, 32).size(), 2);
  // The official archive's batches.meta.txt names the classes.
  std::string meta;
  for (int k = 0; k < 10; ++k) meta += "class" + std::to_string(k) + "\n";
  testing::write_bytes(dir.file("batches.meta.txt"), std::vector<uint8_t>(meta.begin(), meta.end()));
  EXPECT_EQ(load_dataset(dir.path(), Split::Test, 3, 32).class_names[5], "class5");
}

TEST(ImageFolder, ReadsConvertsResizesAndRefusesBadImages) {
  TempDir dir;
  for (const std::string cls : {"cat", "ant"}) {
    std::filesystem::create_directories(dir.file("train/" + cls));
    std::filesystem::create_directories(dir.file("test/" + cls));
    Image rgb{3, 8, 6, std::vector<uint8_t>(3 * 8 * 6, cls == "cat" ? 200 : 10)};
    write_png(dir.file("train/" + cls + "/a.png"), rgb);
    write_png(dir.file("train/" + cls + "/b.png"), rgb);
    write_png(dir.file("test/" + cls + "/c.png"), rgb);
  }
  const Dataset train = load_dataset(dir.path(), Split::Train, 1, 4);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"ant", "cat"}));  // sorted
  EXPECT_EQ(train.size(), 4);
  EXPECT_EQ(train.channels, 1);
  EXPECT_EQ(train.height, 4);
  EXPECT_EQ(train.labels, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(train.image(3)[0], 200);
  EXPECT_EQ(load_dataset(dir.path(), Split::Test, 3, 4).size(), 2);
  testing::write_bytes(dir.file("train/cat/broken.png"), {0x89, 'P', 'N', 'G', 1, 2, 3});
  const std::string e = error_of([&] { load_dataset(dir.path(), Split::Train, 1, 4); });
  EXPECT_NE(e.find("[image] " + dir.file("train/cat/broken.png") + ": cannot decode"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { load_dataset(dir.file("nope"), Split::Train, 1, 4); }).find("no such directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_dataset(dir.file("train/ant"), Split::Train, 1, 4); }).find("not a dataset directory"),
            std::string::npos);
}

TEST(ImageFolder, RefusesADatasetThatCannotFitInMemoryBeforeDecoding) {
  TempDir dir;
  for (const char* cls : {"a", "b"}) {
    std::filesystem::create_directories(dir.file(std::string("train/") + cls));
    for (const char* f : {"1.png", "2.png"}) {
      write_png(dir.file(std::string("train/") + cls + "/" + f), Image{1, 8, 8, std::vector<uint8_t>(64, 1)});
    }
  }
  ::setenv("VIT_MEMORY_LIMIT", "4096", 1);  // 4 images x 3x32x32 = 12 KiB do not fit in 4 KiB
  const std::string e =
      error_of([&] { load_image_folder(dir.file("train"), 3, 32, kDefaultMaxPixels, Residency::Memory); });
  const Dataset streamed = load_image_folder(dir.file("train"), 3, 32);  // auto: streamed instead
  ::unsetenv("VIT_MEMORY_LIMIT");
  EXPECT_NE(e.find("[memory] " + dir.file("train") +
                   ": 4 images at 3x32x32 needs about 12 KiB but this machine has "
                   "4 KiB (--data-residency memory holds them in memory; stream decodes them batch by batch)"),
            std::string::npos)
      << e;
  EXPECT_TRUE(streamed.streamed());
  EXPECT_TRUE(streamed.pixels.empty());
  EXPECT_EQ(streamed.size(), 4);
  EXPECT_EQ(load_image_folder(dir.file("train"), 3, 32).size(), 4);
  // A pixel limit given by the caller applies to every image of the folder.
  EXPECT_NE(
      error_of([&] { load_image_folder(dir.file("train"), 3, 32, 10); }).find("64 pixels exceeds the limit of 10"),
      std::string::npos);
}

TEST(Image, PixelLimitRefusesBeforeDecoding) {
  TempDir dir;
  write_png(dir.file("big.png"), Image{1, 300, 300, std::vector<uint8_t>(90000, 5)});
  EXPECT_NE(error_of([&] { read_image(dir.file("big.png"), 1000); }).find("90000 pixels exceeds the limit of 1000"),
            std::string::npos);
  const Image ok = read_image(dir.file("big.png"));
  EXPECT_EQ(ok.height, 300);
  const Image grey = convert_channels(Image{3, 1, 1, {255, 0, 0}}, 1);
  EXPECT_EQ(grey.pixels[0], 76);  // 0.299 * 255 (PIL's luminance)
  const Image small = resize(ok, 10, 10);
  EXPECT_EQ(small.pixels[55], 5);
}

}  // namespace
}  // namespace vit::data

namespace vit::data {
namespace {

// Found by fuzzing with stb compiled in: JPEGs whose Huffman tables declare more than 256 codes
// overflow stb_image 2.27's tables (three variants: plain, in a segment running past the end of
// the file, after 0xFF fill bytes before SOI), and PNM headers whose integers overflow. Each is
// refused before stb sees it: JPEG segments are checked, and formats other than PNG, JPEG and
// BMP never reach stb.
TEST(Image, RefusesWhatStbWouldMishandle) {
  int crashes = 0, jpeg_crashes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(VIT_GOLDEN_DIR) + "/../fuzz/corpus/image")) {
    if (entry.path().filename().string().rfind("crash-", 0) != 0) continue;
    ++crashes;
    const std::string e = error_of([&] { read_image(entry.path().string()); });
    EXPECT_NE(e.find("[image] " + entry.path().string() + ": "), std::string::npos) << e;
    jpeg_crashes += e.find("corrupt JPEG (a Huffman table declares ") != std::string::npos;
  }
  EXPECT_GE(crashes, 4);
  EXPECT_GE(jpeg_crashes, 3);
  const std::vector<uint8_t> ppm = {'P', '6', '\n', '4', '4', '4', '4', '4', '4', '4', '4', '4', '4', ' ', '1', '\n'};
  EXPECT_NE(error_of([&] {
              decode_image(ppm.data(), ppm.size(), "x.ppm");
            }).find("[image] x.ppm: cannot decode (not a PNG, JPEG or BMP file)"),
            std::string::npos);
  // A hand-made one: SOI, DHT with 16 x 255 codes, EOI.
  std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x13, 0x00};
  for (int k = 0; k < 16; ++k) jpeg.push_back(255);
  jpeg.insert(jpeg.end(), {0xFF, 0xD9});
  const std::string e2 = error_of([&] { decode_image(jpeg.data(), jpeg.size(), "hand.jpg"); });
  EXPECT_NE(e2.find("[image] hand.jpg: corrupt JPEG (a Huffman table declares 4080 codes, at most 256 exist)"),
            std::string::npos)
      << e2;
}

}  // namespace
}  // namespace vit::data

namespace vit::data {
namespace {

// A folder of photos of two sizes, one class each, held in memory and streamed: the same images,
// labels and classes, and Dataset::read gives the same bytes; a subset of a streamed folder stays
// streamed; a file that stops decoding after the listing is named when its batch is read.
TEST(StreamedFolder, ReadsTheSameImagesAsTheFolderHeldInMemory) {
  testing::TempDir dir;
  for (int c = 0; c < 2; ++c) {
    const std::string cls = c == 0 ? "dog" : "cat";
    std::filesystem::create_directories(dir.file("train/" + cls));
    for (int i = 0; i < 3; ++i) {
      Image img{3, 20 + 7 * i, 31 - 5 * i, {}};
      img.pixels.resize(static_cast<size_t>(img.channels * img.height * img.width));
      for (size_t p = 0; p < img.pixels.size(); ++p) img.pixels[p] = static_cast<uint8_t>((p * (3 + i + c)) % 251);
      write_png(dir.file("train/" + cls + "/" + std::to_string(i) + ".png"), img);
    }
  }
  const Dataset memory = load_image_folder(dir.file("train"), 3, 12, kDefaultMaxPixels, Residency::Memory);
  const Dataset stream = load_image_folder(dir.file("train"), 3, 12, kDefaultMaxPixels, Residency::Stream);
  EXPECT_FALSE(memory.streamed());
  ASSERT_TRUE(stream.streamed());
  EXPECT_TRUE(stream.pixels.empty());
  EXPECT_EQ(stream.class_names, memory.class_names);
  EXPECT_EQ(stream.labels, memory.labels);
  ASSERT_EQ(stream.size(), 6);
  std::vector<uint8_t> a(static_cast<size_t>(memory.image_bytes())), b(a.size());
  for (int64_t i = 0; i < 6; ++i) {
    memory.read(i, a.data());
    stream.read(i, b.data());
    EXPECT_EQ(a, b) << i;
  }
  const Dataset part = subset(stream, {4, 1}, "part");
  EXPECT_TRUE(part.streamed());
  EXPECT_EQ(part.files, (std::vector<std::string>{stream.files[4], stream.files[1]}));
  EXPECT_EQ(part.labels, (std::vector<int64_t>{stream.labels[4], stream.labels[1]}));
  // Broken after the listing: named when read, by Dataset::read and by the loader threads.
  testing::write_bytes(stream.files[2], {0x89, 'P', 'N', 'G', 1, 2, 3});
  EXPECT_NE(error_of([&] { stream.read(2, b.data()); }).find("[image] " + stream.files[2] + ": cannot decode"),
            std::string::npos);
  EXPECT_EQ(parse_residency("stream"), Residency::Stream);
  EXPECT_NE(error_of([] { parse_residency("disk"); }).find("--data-residency: must be one of auto, memory, stream"),
            std::string::npos);
}

}  // namespace
}  // namespace vit::data
