// `vit shard`: an image folder dataset written as WebDataset tar shards (see shards.h).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/check.h"
#include "core/output_file.h"
#include "data/loader.h"
#include "data/shards.h"
#include "data/tar.h"

namespace vit::data {
namespace fs = std::filesystem;
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VIT_CHECK(in.good(), "shard", "{}: cannot open", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  VIT_CHECK(!in.bad(), "shard", "{}: cannot read", path);
  return bytes;
}

// The sample's image extension: the file's, lower-cased, "jpeg" as "jpg".
std::string image_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == "jpeg" ? "jpg" : ext;
}

// One split's images in `order`, cut into shards OUT/<prefix>-NNNNNN.tar.
std::vector<std::string> write_split(const Dataset& d, const std::vector<int64_t>& order, const std::string& out,
                                     const std::string& prefix, int64_t per_shard, uint64_t& bytes) {
  std::vector<std::string> written;
  const auto n = static_cast<int64_t>(order.size());
  for (int64_t first = 0, shard = 0; first < n; first += per_shard, ++shard) {
    const std::string path = (fs::path(out) / fmt::format("{}-{:06d}.tar", prefix, shard)).string();
    AtomicFile file("shard", path);
    TarWriter tar([&file](const void* data, size_t size) { file.write(data, size); });
    for (int64_t k = first; k < std::min(n, first + per_shard); ++k) {
      const int64_t i = order[static_cast<size_t>(k)];
      const std::string& image = d.files[static_cast<size_t>(i)];
      const std::vector<uint8_t> encoded = file_bytes(image);
      (void)read_image_header(encoded.data(), encoded.size(), image);  // an image we can read, or refused here
      const std::string key = fmt::format("{:09d}", k);
      tar.add(key + "." + image_extension(image), encoded.data(), encoded.size());
      const std::string cls = std::to_string(d.labels[static_cast<size_t>(i)]);
      tar.add(key + ".cls", reinterpret_cast<const uint8_t*>(cls.data()), cls.size());
    }
    tar.finish();
    file.commit();
    bytes += tar.bytes();
    written.push_back(path);
  }
  return written;
}

// Shards of an earlier `vit shard` into OUT beyond the ones just written (a smaller set replacing a
// larger one): removed, so the folder holds one set.
void remove_stale(const std::string& out, const std::string& prefix, const std::vector<std::string>& kept) {
  for (const std::string& old : find_shards(out, prefix)) {
    if (std::find(kept.begin(), kept.end(), old) == kept.end()) fs::remove(old);
  }
}

}  // namespace

ShardSetWritten write_shard_set(const std::string& src, const std::string& out, int64_t samples_per_shard,
                                uint64_t seed, bool overwrite) {
  const char* op = "shard";
  VIT_CHECK(samples_per_shard >= 1, op, "--shard-size {}: give at least 1 sample per shard", samples_per_shard);
  std::error_code ec;
  VIT_CHECK(fs::is_directory(fs::path(src) / "train", ec), op,
            "{}: not an image folder dataset (expected {}/train/<class>/<image> and test/ or val/)", src, src);
  // Only the file lists: the images are copied as they are, not decoded.
  const Dataset train =
      load_image_folder((fs::path(src) / "train").string(), 3, 1, kDefaultMaxPixels, Residency::Stream);
  Dataset test;
  for (const char* name : {"test", "val"}) {
    const fs::path folder = fs::path(src) / name;
    if (test.size() == 0 && fs::is_directory(folder, ec)) {
      test = load_image_folder(folder.string(), 3, 1, kDefaultMaxPixels, Residency::Stream);
      (void)map_classes(test, train.class_names, fmt::format("the training split ({})", train.source));
    }
  }
  VIT_CHECK(!fs::exists(out, ec) || fs::is_directory(out, ec), op, "{}: exists and is not a directory", out);
  fs::create_directories(out, ec);
  VIT_CHECK(!ec, op, "{}: cannot create the folder ({})", out, ec.message());
  if (!overwrite) {
    for (const char* prefix : {"train", "test"}) {
      const std::vector<std::string> there = find_shards(out, prefix);
      VIT_CHECK(there.empty(), op, "{}: holds shards already ({}; --overwrite replaces them)", out, there.front());
    }
  }
  ShardSetWritten w;
  const std::vector<int64_t> shuffled = epoch_batches(train.size(), train.size(), true, false, seed, 0).front();
  w.train = write_split(train, shuffled, out, "train", samples_per_shard, w.bytes);
  w.train_samples = train.size();
  std::vector<int64_t> in_order(static_cast<size_t>(test.size()));
  for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = static_cast<int64_t>(i);
  w.test = write_split(test, in_order, out, "test", samples_per_shard, w.bytes);
  w.test_samples = test.size();
  std::string names;
  for (const std::string& n : train.class_names) names += n + "\n";
  write_file_atomically(op, (fs::path(out) / "classes.txt").string(), names.data(), names.size());
  remove_stale(out, "train", w.train);
  remove_stale(out, "test", w.test);
  return w;
}

}  // namespace vit::data
