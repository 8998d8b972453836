// The `vit` command given what a hostile new user gives it (issue 11): a model of depth 0 and a
// checkpoint that says depth 0 (refused by every command, never a crash), image folders whose
// splits have different classes and datasets whose class names differ from a checkpoint's
// (scored by name), and empty splits (refused before anything is written).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "data/image.h"
#include "io/safetensors.h"
#include "support/files.h"
#include "support/run_vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_error;
using testing::TempDir;
using testing::vit;

// A tiny model for 8x8 grey images, one epoch, one thread (no --depth: each test adds it).
const std::string kModel =
    " --image-size 8 --patch-size 4 --dim 8 --heads 2 --pool mean --epochs 1 --batch-size 4 --threads 1";

// root/<split>/<class>/<i>.png, each class its own brightness.
void write_folders(const std::string& root, const std::string& split, const std::vector<std::string>& classes,
                   int per_class) {
  for (const std::string& name : classes) {
    fs::create_directories(root + "/" + split + "/" + name);
    for (int i = 0; i < per_class; ++i) {
      const auto value = static_cast<uint8_t>(40 * (name[0] - 'a') + 10 * i);
      data::write_png(root + "/" + split + "/" + name + "/" + std::to_string(i) + ".png",
                      data::Image{1, 8, 8, std::vector<uint8_t>(64, value)});
    }
  }
}

// The JSON line of `vit eval --json` (notes go to stderr, which the tests read too).
nlohmann::json eval_json(const CommandResult& r) {
  const size_t start = r.out.find('{');
  EXPECT_NE(start, std::string::npos) << r.out;
  return nlohmann::json::parse(r.out.substr(start == std::string::npos ? 0 : start));
}

std::vector<int64_t> row_sums(const nlohmann::json& confusion) {
  std::vector<int64_t> sums;
  for (const auto& row : confusion) {
    int64_t s = 0;
    for (const auto& v : row) s += v.get<int64_t>();
    sums.push_back(s);
  }
  return sums;
}

// Family 1. `vit train --depth 0` wrote a checkpoint and `vit attention` on it died of SIGSEGV.
// Depth 0 is refused by the config; a checkpoint saying depth 0 (as older versions wrote) is
// refused by every command that loads one.
TEST(HostileCli, DepthZeroIsRefusedByEveryCommand) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("data"), 8, 4, 8);
  const std::string refused = "[vit_config] dim 8, depth 0, num_heads 2 must be positive";
  expect_error(vit("train --data " + dir.file("data") + " --out " + dir.file("zero") + kModel + " --depth 0"), refused);
  EXPECT_FALSE(fs::exists(dir.file("zero")));

  const CommandResult ok =
      vit("train --data " + dir.file("data") + " --out " + dir.file("run") + kModel + " --depth 1");
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  const io::WeightsFile file = io::load_safetensors(dir.file("run/last.safetensors"));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : file.tensors) {
    if (name.find("blocks.") == std::string::npos) tensors.emplace_back(name, t);
  }
  std::map<std::string, std::string> metadata = file.metadata;
  auto config = nlohmann::json::parse(metadata.at("model_config"));
  config["depth"] = 0;
  metadata["model_config"] = config.dump();
  const std::string forged = dir.file("depth0.safetensors");
  io::save_safetensors(forged, tensors, metadata);
  data::write_png(dir.file("x.png"), data::Image{1, 8, 8, std::vector<uint8_t>(64, 50)});

  const std::string bad = "[checkpoint] " + forged + ": model_config: " + refused;
  expect_error(vit("attention --checkpoint " + forged + " --out " + dir.file("a.png") + " " + dir.file("x.png")), bad);
  EXPECT_FALSE(fs::exists(dir.file("a.png")));
  expect_error(vit("predict --checkpoint " + forged + " " + dir.file("x.png")), bad);
  expect_error(vit("eval --checkpoint " + forged + " --data " + dir.file("data")), bad);
  expect_error(vit("info --checkpoint " + forged), bad);
  // The unforged checkpoint still draws its attention.
  const CommandResult drawn = vit("attention --checkpoint " + dir.file("run/last.safetensors") + " --out " +
                                  dir.file("a.png") + " " + dir.file("x.png"));
  EXPECT_EQ(drawn.exit_code, 0) << drawn.out;
  EXPECT_TRUE(fs::exists(dir.file("a.png")));
}

// Family 2. Labels were each split's position in its own sorted folder list: with train/{a,b,c}
// and test/{a,c}, test images of c were scored as b. They are matched by name.
TEST(HostileCli, ImageFolderClassesAreMatchedByName) {
  TempDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  write_folders(data, "train", {"a", "b", "c"}, 4);
  write_folders(data, "test", {"a", "c"}, 2);
  write_folders(data, "test", {"c"}, 3);  // a third c image: c has 3 test images, a 2
  const CommandResult trained = vit("train --data " + data + " --out " + run + " --num-classes 3 --depth 1" + kModel);
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + data + "/test has no images of: b\n"), std::string::npos) << trained.out;

  const CommandResult r = vit("eval --checkpoint " + run + "/last.safetensors --data " + data + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("note: " + data + "/test has no images of: b\n"), std::string::npos) << r.out;
  const nlohmann::json j = eval_json(r);
  EXPECT_EQ(j["images"], 5);
  EXPECT_EQ(row_sums(j["confusion"]), (std::vector<int64_t>{2, 0, 3})) << "true classes a, b, c";
  EXPECT_TRUE(j["per_class_accuracy"]["b"].is_null()) << j.dump();

  // A folder with a class the checkpoint does not know: refused, both lists named.
  write_folders(dir.file("other"), "test", {"a", "d"}, 1);
  expect_error(vit("eval --checkpoint " + run + "/last.safetensors --data " + dir.file("other")),
               "[data] " + dir.file("other/test") + ": class 'd' is not among the classes of the checkpoint " + run +
                   "/last.safetensors: [a, b, c]; the data's classes are [a, d]");
  // Training refuses a test class the training split lacks, before writing anything.
  write_folders(dir.file("other"), "train", {"a", "b"}, 2);
  expect_error(vit("train --data " + dir.file("other") + " --out " + dir.file("run2") + " --depth 1" + kModel),
               "[data] " + dir.file("other/test") + ": class 'd' is not among the classes of the training split (" +
                   dir.file("other/train") + "): [a, b]; the data's classes are [a, d]");
  EXPECT_FALSE(fs::exists(dir.file("run2")));
}

// Family 2, IDX: the checkpoint's class names are the truth for a classes.txt too.
TEST(HostileCli, IdxClassNamesAreMatchedByName) {
  TempDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  testing::write_toy_mnist(data, 20, 13, 8);  // test labels 1, 4, 7, 0, 3, 6, 9, 2, 5, 8, 1, 4, 7
  const CommandResult trained = vit("train --data " + data + " --out " + run + " --depth 1" + kModel);
  ASSERT_EQ(trained.exit_code, 0) << trained.out;
  const std::string checkpoint = run + "/last.safetensors";
  const nlohmann::json base = eval_json(vit("eval --checkpoint " + checkpoint + " --data " + data + " --json"));
  // The same files, their classes named in reverse: label byte k is the class named 9 - k.
  fs::copy(data, dir.file("reversed"));
  std::string reversed;
  for (int k = 9; k >= 0; --k) reversed += std::to_string(k) + "\n";
  testing::write_bytes(dir.file("reversed/classes.txt"), std::vector<uint8_t>(reversed.begin(), reversed.end()));
  const CommandResult r = vit("eval --checkpoint " + checkpoint + " --data " + dir.file("reversed") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json mapped = eval_json(r);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(mapped["confusion"][9 - k], base["confusion"][k]) << "true class " << k;
  // Names the checkpoint does not have: refused with both lists.
  std::string other;
  for (int k = 0; k < 10; ++k) other += "n" + std::to_string(k) + "\n";
  testing::write_bytes(dir.file("reversed/classes.txt"), std::vector<uint8_t>(other.begin(), other.end()));
  expect_error(vit("eval --checkpoint " + checkpoint + " --data " + dir.file("reversed")),
               "[data] " + dir.file("reversed/t10k-images-idx3-ubyte") +
                   ": classes 'n0', 'n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8', 'n9' are not among the classes "
                   "of the checkpoint " +
                   checkpoint +
                   ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]; the data's classes are [n0, "
                   "n1, n2, n3, n4, n5, n6, n7, n8, n9]");
}

// Family 9. An IDX training file of 0 images trained "1 epochs x 0 steps", printed nan and
// wrote a checkpoint of random weights. Empty splits are refused, naming the file.
TEST(HostileCli, EmptySplitsAreRefused) {
  TempDir dir;
  testing::write_toy_mnist(dir.file("no_train"), 0, 4, 8);
  expect_error(vit("train --data " + dir.file("no_train") + " --out " + dir.file("run") + " --mean 0.5 --std 0.5" +
                   " --depth 1" + kModel),
               "[data] " + dir.file("no_train/train-images-idx3-ubyte") + ": no images: the train split is empty");
  EXPECT_FALSE(fs::exists(dir.file("run")));
  testing::write_toy_mnist(dir.file("no_test"), 8, 0, 8);
  expect_error(vit("train --data " + dir.file("no_test") + " --out " + dir.file("run") + " --depth 1" + kModel),
               "[data] " + dir.file("no_test/t10k-images-idx3-ubyte") + ": no images: the test split is empty");
  EXPECT_FALSE(fs::exists(dir.file("run")));
  // eval of a good checkpoint on an empty split.
  testing::write_toy_mnist(dir.file("data"), 8, 4, 8);
  const CommandResult ok =
      vit("train --data " + dir.file("data") + " --out " + dir.file("run") + " --depth 1" + kModel);
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  expect_error(vit("eval --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("no_test")),
               "[data] " + dir.file("no_test/t10k-images-idx3-ubyte") + ": no images: the test split is empty");
  expect_error(
      vit("eval --split train --checkpoint " + dir.file("run/last.safetensors") + " --data " + dir.file("no_train")),
      "[data] " + dir.file("no_train/train-images-idx3-ubyte") + ": no images: the train split is empty");
}

// Training images of one class: a 1-way head that "reaches 100%" was trained silently; refused.
TEST(HostileCli, OneClassOfTrainingImagesIsRefused) {
  TempDir dir;
  write_folders(dir.file("one"), "train", {"a"}, 4);
  write_folders(dir.file("one"), "test", {"a"}, 2);
  expect_error(vit("train --data " + dir.file("one") + " --out " + dir.file("run") + " --depth 1" + kModel),
               "[train] " + dir.file("one/train") +
                   ": every training image is of one class ('a'): a classifier needs images of at least 2 classes");
  EXPECT_FALSE(fs::exists(dir.file("run")));
}

}  // namespace
}  // namespace vit
