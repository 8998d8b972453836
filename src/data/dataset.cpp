// Dataset readers (see dataset.h).
#include "data/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "core/check.h"
#include "core/system.h"
#include "data/image.h"
#include "data/shards.h"

namespace vit::data {
namespace fs = std::filesystem;
namespace {

// Dataset files (and what a gzip file inflates to) are held in memory: refuse more than this.
constexpr size_t kMaxFileBytes = (size_t{4} << 30) - 1;

std::vector<uint8_t> read_file(const std::string& path, const char* op) {
  std::error_code ec;
  VIT_CHECK(fs::exists(path, ec), op, "{}: no such file", path);
  VIT_CHECK(fs::is_regular_file(path, ec), op, "{}: not a regular file", path);
  const auto size = fs::file_size(path, ec);
  VIT_CHECK(!ec && size <= kMaxFileBytes, op, "{}: {} bytes is more than the {} bytes a dataset file may have", path,
            size, kMaxFileBytes);
  std::ifstream in(path, std::ios::binary);
  VIT_CHECK(in.good(), op, "{}: cannot open", path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Bytes gunzipped when they start with the gzip magic (1f 8b).
std::vector<uint8_t> maybe_gunzip(std::vector<uint8_t> raw, const std::string& path, const char* op) {
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  z_stream z{};
  VIT_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, op, "{}: zlib init failed", path);
  z.next_in = raw.data();
  z.avail_in = static_cast<uInt>(raw.size());
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    z.next_out = chunk;
    z.avail_out = sizeof(chunk);
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      inflateEnd(&z);
      fail(op, "{}: corrupt or truncated gzip data ({})", path, z.msg ? z.msg : "inflate failed");
    }
    out.insert(out.end(), chunk, chunk + (sizeof(chunk) - z.avail_out));
    if (out.size() > kMaxFileBytes) {
      inflateEnd(&z);
      fail(op, "{}: decompresses to more than {} bytes", path, kMaxFileBytes);
    }
    if (status == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      fail(op, "{}: truncated gzip data", path);
    }
  }
  inflateEnd(&z);
  return out;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::vector<std::string> digit_names() {
  std::vector<std::string> names;
  for (int d = 0; d < 10; ++d) names.push_back(std::to_string(d));
  return names;
}

std::string existing(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (fs::exists(c)) return c;
  }
  return "";
}

}  // namespace

Dataset subset(const Dataset& d, const std::vector<int64_t>& indices, std::string source) {
  Dataset out;
  out.channels = d.channels;
  out.height = d.height;
  out.width = d.width;
  out.class_names = d.class_names;
  out.source = std::move(source);
  out.max_pixels = d.max_pixels;
  out.shaper = d.shaper;
  out.shards = d.shards;
  const auto bytes = static_cast<size_t>(d.image_bytes());
  if (!d.streamed()) out.pixels.reserve(bytes * indices.size());
  out.labels.reserve(indices.size());
  for (const int64_t i : indices) {
    VIT_CHECK(i >= 0 && i < d.size(), "data", "{}: image {} out of range (it has {})", d.source, i, d.size());
    if (d.sharded()) out.members.push_back(d.members[static_cast<size_t>(i)]);
    if (!d.files.empty()) out.files.push_back(d.files[static_cast<size_t>(i)]);
    if (!d.streamed()) {
      out.pixels.insert(out.pixels.end(), d.image(i), d.image(i) + bytes);
    }
    out.labels.push_back(d.labels[static_cast<size_t>(i)]);
  }
  return out;
}

Dataset load_mnist_idx(const std::string& images_path, const std::string& labels_path) {
  return parse_mnist_idx(read_file(images_path, "mnist"), read_file(labels_path, "mnist"), images_path, labels_path);
}

Dataset parse_mnist_idx(std::vector<uint8_t> images_file, std::vector<uint8_t> labels_file,
                        const std::string& images_path, const std::string& labels_path) {
  const char* op = "mnist";
  const std::vector<uint8_t> images = maybe_gunzip(std::move(images_file), images_path, op);
  const std::vector<uint8_t> labels = maybe_gunzip(std::move(labels_file), labels_path, op);
  VIT_CHECK(images.size() >= 16, op, "{}: {} bytes is too short for an IDX image header", images_path, images.size());
  VIT_CHECK(labels.size() >= 8, op, "{}: {} bytes is too short for an IDX label header", labels_path, labels.size());
  const uint32_t image_magic = big_endian(images.data()), label_magic = big_endian(labels.data());
  VIT_CHECK(image_magic == 0x00000803, op, "{}: wrong magic number 0x{:08x} (expected 0x00000803 for images)",
            images_path, image_magic);
  VIT_CHECK(label_magic == 0x00000801, op, "{}: wrong magic number 0x{:08x} (expected 0x00000801 for labels)",
            labels_path, label_magic);
  const uint64_t n = big_endian(images.data() + 4), rows = big_endian(images.data() + 8),
                 cols = big_endian(images.data() + 12), n_labels = big_endian(labels.data() + 4);
  VIT_CHECK(rows > 0 && cols > 0 && rows <= 4096 && cols <= 4096, op, "{}: implausible image size {}x{}", images_path,
            rows, cols);
  VIT_CHECK(images.size() - 16 == n * rows * cols, op,
            "{}: header says {} images of {}x{} ({} bytes) but the file has {}", images_path, n, rows, cols,
            n * rows * cols, images.size() - 16);
  VIT_CHECK(labels.size() - 8 == n_labels, op, "{}: header says {} labels but the file has {}", labels_path, n_labels,
            labels.size() - 8);
  VIT_CHECK(n == n_labels, op, "{} has {} images but {} has {} labels", images_path, n, labels_path, n_labels);
  Dataset d;
  d.channels = 1;
  d.height = static_cast<int64_t>(rows);
  d.width = static_cast<int64_t>(cols);
  d.pixels.assign(images.begin() + 16, images.end());
  d.class_names = digit_names();
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t label = labels[8 + i];
    VIT_CHECK(label < 10, op, "{}: label {} at index {} is not a digit 0-9", labels_path, label, i);
    d.labels.push_back(label);
  }
  d.source = images_path;
  return d;
}

Dataset load_cifar10(const std::vector<std::string>& batch_paths) {
  const char* op = "cifar10";
  VIT_CHECK(!batch_paths.empty(), op, "no batch files given");
  Dataset d;
  d.channels = 3;
  d.height = d.width = 32;
  d.class_names = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  for (const std::string& path : batch_paths) {
    const std::vector<uint8_t> bytes = read_file(path, op);
    append_cifar10_batch(bytes.data(), bytes.size(), path, d);
  }
  d.source = batch_paths.front();
  return d;
}

void append_cifar10_batch(const uint8_t* bytes, size_t size, const std::string& name, Dataset& into) {
  const char* op = "cifar10";
  constexpr size_t kRecord = 1 + 3 * 32 * 32;
  VIT_CHECK(into.channels == 3 && into.height == 32 && into.width == 32, op,
            "{}: appending to a dataset of {}x{}x{} images, not 3x32x32", name, into.channels, into.height, into.width);
  VIT_CHECK(size > 0 && size % kRecord == 0, op,
            "{}: {} bytes is not a whole number of {}-byte records (label + 3x32x32 pixels)", name, size, kRecord);
  for (size_t r = 0; r < size / kRecord; ++r) {
    VIT_CHECK(bytes[r * kRecord] < 10, op, "{}: label {} in record {} is not a class 0-9", name, bytes[r * kRecord], r);
  }
  into.labels.reserve(into.labels.size() + size / kRecord);
  into.pixels.reserve(into.pixels.size() + size / kRecord * (kRecord - 1));
  for (size_t r = 0; r < size / kRecord; ++r) {
    const uint8_t* rec = bytes + r * kRecord;
    into.labels.push_back(rec[0]);
    into.pixels.insert(into.pixels.end(), rec + 1, rec + kRecord);
  }
}

Dataset load_image_folder(const std::string& root, int64_t channels, int64_t size, int64_t max_pixels,
                          Residency residency, const ImageShaper& shaper) {
  const char* op = "image_folder";
  std::error_code ec;
  VIT_CHECK(fs::is_directory(root, ec), op, "{}: not a directory", root);
  VIT_CHECK((channels == 1 || channels == 3) && size > 0, op, "invalid target {} channels, size {}", channels, size);
  Dataset d;
  d.channels = channels;
  d.height = d.width = size;
  d.source = root;
  d.max_pixels = max_pixels;
  d.shaper = shaper;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) d.class_names.push_back(entry.path().filename().string());
  }
  std::sort(d.class_names.begin(), d.class_names.end());
  VIT_CHECK(!d.class_names.empty(), op, "{}: no class sub-folders (expected root/<class>/<image>)", root);
  // List every class's images first, so the dataset's size is known (and refused if it cannot
  // fit) before any image is decoded.
  // (Paths as strings: one folder's names sort the same either way, and fs::path's component-wise
  // compare made sorting an ImageNet-sized listing several seconds slower.)
  std::vector<std::vector<std::string>> class_files(d.class_names.size());
  double total = 0;
  for (size_t k = 0; k < d.class_names.size(); ++k) {
    std::vector<std::string>& files = class_files[k];
    for (const auto& entry : fs::directory_iterator(fs::path(root) / d.class_names[k])) {
      std::string name = entry.path().string();
      // The extension as fs::path::extension() sees it: a leading dot (".png") is no extension.
      const size_t dot = name.rfind('.'), slash = name.rfind('/');
      const size_t base = slash == std::string::npos ? 0 : slash + 1;
      std::string ext = dot != std::string::npos && dot > base ? name.substr(dot) : "";
      std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
      const bool image_name = ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
      std::error_code file_error;
      if (image_name && entry.is_regular_file(file_error)) {  // (follows links: a dangling one is no file)
        files.push_back(std::move(name));
      } else {
        d.skipped.push_back(std::move(name));  // counted, and said by the caller
      }
    }
    std::sort(files.begin(), files.end());
    total += static_cast<double>(files.size());
  }
  const double image_bytes = static_cast<double>(channels) * static_cast<double>(size) * static_cast<double>(size);
  // Auto: streamed above kStreamAboveBytes, or when they would take over half the memory there is.
  const double decoded = total * image_bytes;
  if (streams(decoded, residency)) {
    for (size_t k = 0; k < d.class_names.size(); ++k) {
      for (std::string& file : class_files[k]) {
        d.files.push_back(std::move(file));
        d.labels.push_back(static_cast<int64_t>(k));
      }
    }
    VIT_CHECK(d.size() > 0, op, "{}: no images (.png, .jpg, .jpeg, .bmp) in the class folders", root);
    return d;
  }
  check_fits_in_memory(total * image_bytes,
                       fmt::format("{}: {:.0f} images at {}x{}x{}", root, total, channels, size, size),
                       " (--data-residency memory holds them in memory; stream decodes them batch by batch)");
  d.pixels.reserve(static_cast<size_t>(total) * static_cast<size_t>(channels * size * size));
  for (size_t k = 0; k < d.class_names.size(); ++k) {
    for (const auto& file : class_files[k]) {
      d.files.push_back(file);  // kept: the folder is identified by its files, held in memory or not
      const Image image = shape_image_file(read_file_bytes(file), file, channels, size, max_pixels, shaper);
      d.pixels.insert(d.pixels.end(), image.pixels.begin(), image.pixels.end());
      d.labels.push_back(static_cast<int64_t>(k));
    }
  }
  VIT_CHECK(d.size() > 0, op, "{}: no images (.png, .jpg, .jpeg, .bmp) in the class folders", root);
  return d;
}

std::vector<std::string> read_names_file(const std::string& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
  std::ifstream in(file);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  VIT_CHECK(!in.bad(), "data", "{}: cannot read", file);
  for (size_t k = 1; k < names.size(); ++k) {  // a prediction names one class: names must differ
    const auto earlier = std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(k), names[k]);
    VIT_CHECK(earlier == names.begin() + static_cast<std::ptrdiff_t>(k), "data",
              "{}: class name '{}' appears twice (one different name per line)", file, names[k]);
  }
  VIT_CHECK(!names.empty(), "data", "{}: no class names (one name per line)", file);
  return names;
}

namespace {

// Class names from a text file, one per line (blank lines ignored), replacing the format's
// default names ("0".."9" for IDX); the file must name exactly as many classes as the format has.
void read_class_names(const fs::path& file, Dataset& d) {
  std::vector<std::string> names = read_names_file(file.string());
  if (names.empty()) return;
  VIT_CHECK(names.size() == d.class_names.size(), "data",
            "{}: {} class names, but {} has {} classes (one name per line)", file.string(), names.size(), d.source,
            d.class_names.size());
  d.class_names = std::move(names);
}

// A split with no images cannot be trained or scored on (an IDX file may hold 0 images).
Dataset non_empty(Dataset d, const char* split) {
  VIT_CHECK(d.size() > 0, "data", "{}: no images: the {} split is empty", d.source, split);
  return d;
}

// A split's IDX file ("train"/"t10k", "images"/"labels", "idx3"/"idx1") under any of its usual
// names; "" when there is none.
std::string idx_file(const fs::path& root, const std::string& prefix, const std::string& kind, const std::string& idx) {
  return existing({(root / (prefix + "-" + kind + "-" + idx + "-ubyte")).string(),
                   (root / (prefix + "-" + kind + "-" + idx + "-ubyte.gz")).string(),
                   (root / (prefix + "-" + kind + "." + idx + "-ubyte")).string()});
}

}  // namespace

std::string skipped_note(const Dataset& d) {
  if (d.skipped.empty()) return "";
  std::vector<std::string> shown(d.skipped.begin(), d.skipped.begin() + std::min<size_t>(d.skipped.size(), 3));
  return fmt::format(
      "{}: skipped {} entr{} of the class folders that are not image files (.png, .jpg, .jpeg, .bmp "
      "regular files): {}{}",
      d.source, d.skipped.size(), d.skipped.size() == 1 ? "y" : "ies", fmt::join(shown, ", "),
      d.skipped.size() > shown.size() ? ", ..." : "");
}

Dataset load_dataset(const std::string& dir, Split split, int64_t channels, int64_t size, int64_t max_pixels,
                     Residency residency, const ImageShaper& shaper) {
  std::error_code ec;
  VIT_CHECK(fs::exists(dir, ec), "data", "{}: no such directory", dir);
  VIT_CHECK(fs::is_directory(dir, ec), "data", "{}: not a directory", dir);
  const fs::path root(dir);
  const bool train = split == Split::Train;
  const char* split_name = train ? "train" : "test";
  const std::string prefix = train ? "train" : "t10k", other_prefix = train ? "t10k" : "train";
  const std::string images = idx_file(root, prefix, "images", "idx3");
  if (!images.empty()) {
    const std::string labels = idx_file(root, prefix, "labels", "idx1");
    VIT_CHECK(!labels.empty(), "data", "{}: found {} but no {}-labels-idx1-ubyte[.gz]", dir, images, prefix);
    Dataset d = load_mnist_idx(images, labels);
    read_class_names(root / "classes.txt", d);  // e.g. Fashion-MNIST's names instead of "0".."9"
    return non_empty(std::move(d), split_name);
  }
  if (const std::string other = idx_file(root, other_prefix, "images", "idx3"); !other.empty()) {
    fail("data", "{}: found {} but no {}-images-idx3-ubyte[.gz] for the {} split", dir, other, prefix, split_name);
  }
  for (const fs::path& base : {root, root / "cifar-10-batches-bin"}) {
    if (fs::exists(base / "data_batch_1.bin") || fs::exists(base / "test_batch.bin")) {
      std::vector<std::string> files;
      if (train) {
        for (int i = 1; i <= 5; ++i) {
          if (fs::exists(base / fmt::format("data_batch_{}.bin", i)))
            files.push_back((base / fmt::format("data_batch_{}.bin", i)).string());
        }
        VIT_CHECK(!files.empty(), "data", "{}: found test_batch.bin but no data_batch_1.bin for the train split",
                  base.string());
      } else {
        VIT_CHECK(fs::exists(base / "test_batch.bin"), "data",
                  "{}: found data_batch_1.bin but no test_batch.bin for the test split", base.string());
        files.push_back((base / "test_batch.bin").string());
      }
      Dataset d = load_cifar10(files);
      read_class_names(base / "batches.meta.txt", d);  // the names file of the official CIFAR-10 archive
      read_class_names(root / "classes.txt", d);
      return non_empty(std::move(d), split_name);
    }
  }
  // WebDataset shards: train-*.tar, test-*.tar (or val-*.tar), and classes.txt beside them.
  std::vector<std::string> shards = find_shards(dir, train ? "train" : "test");
  if (shards.empty() && !train) shards = find_shards(dir, "val");
  if (!shards.empty()) {
    return non_empty(
        load_shards(shards, (root / "classes.txt").string(), channels, size, max_pixels, residency, shaper),
        split_name);
  }
  const std::vector<std::string> other_shards = find_shards(dir, train ? "test" : "train");
  VIT_CHECK(other_shards.empty(), "data", "{}: found {} but no {}-*.tar shards for the {} split", dir,
            other_shards.front(), train ? "train" : "test (or val)", split_name);
  const std::string folder =
      train ? (root / "train").string() : existing({(root / "test").string(), (root / "val").string()});
  if (!folder.empty() && fs::is_directory(folder, ec)) {
    return non_empty(load_image_folder(folder, channels, size, max_pixels, residency, shaper), split_name);
  }
  const std::string other_folder =
      train ? existing({(root / "test").string(), (root / "val").string()}) : (root / "train").string();
  VIT_CHECK(!fs::is_directory(other_folder, ec), "data", "{}: found {}/ but no {}/ folder for the {} split", dir,
            other_folder, train ? "train" : "test (or val)", split_name);
  fail("data",
       "{}: not a dataset directory (expected MNIST IDX files, CIFAR-10 batches, {}/<class>/ image "
       "folders or {}-*.tar shards)",
       dir, train ? "train" : "test", train ? "train" : "test");
}

std::vector<std::string> map_classes(Dataset& d, const std::vector<std::string>& known, const std::string& whose) {
  const char* op = "data";
  for (int64_t label : d.labels) {
    VIT_CHECK(label >= 0 && label < d.num_classes(), op, "{}: label {} is not one of its {} classes", d.source, label,
              d.num_classes());
  }
  if (d.class_names != known) {
    std::map<std::string, int64_t> position;
    for (size_t k = 0; k < known.size(); ++k) {
      VIT_CHECK(position.emplace(known[k], static_cast<int64_t>(k)).second, op,
                "{}: the classes of {} name '{}' twice ([{}]), so they cannot be matched by name", d.source, whose,
                known[k], fmt::join(known, ", "));
    }
    std::vector<std::string> unknown;
    std::vector<int64_t> to(d.class_names.size(), -1);
    for (size_t k = 0; k < d.class_names.size(); ++k) {
      const auto it = position.find(d.class_names[k]);
      if (it == position.end())
        unknown.push_back(d.class_names[k]);
      else
        to[k] = it->second;
    }
    VIT_CHECK(unknown.empty(), op, "{}: {} '{}' {} not among the classes of {}: [{}]; the data's classes are [{}]",
              d.source, unknown.size() == 1 ? "class" : "classes", fmt::join(unknown, "', '"),
              unknown.size() == 1 ? "is" : "are", whose, fmt::join(known, ", "), fmt::join(d.class_names, ", "));
    for (int64_t& label : d.labels) label = to[static_cast<size_t>(label)];
    d.class_names = known;
  }
  std::vector<bool> has_images(known.size(), false);
  for (int64_t label : d.labels) has_images[static_cast<size_t>(label)] = true;
  std::vector<std::string> missing;
  for (size_t k = 0; k < known.size(); ++k) {
    if (!has_images[k]) missing.push_back(known[k]);
  }
  return missing;
}

}  // namespace vit::data
