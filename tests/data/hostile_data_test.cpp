// What a hostile new user hands the dataset readers: empty splits (refused, naming the file),
// and splits whose class lists differ (mapped by name, unknown classes refused with both lists,
// classes without images reported).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/check.h"
#include "data/dataset.h"
#include "data/image.h"
#include "support/files.h"

namespace vit::data {
namespace {

using testing::TempDir;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
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
