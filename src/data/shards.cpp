// WebDataset tar shards as a dataset, and `vit shard`'s writer (see shards.h).
#include "data/shards.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/check.h"
#include "core/output_file.h"
#include "core/system.h"
#include "data/loader.h"
#include "data/tar.h"

namespace vit::data {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kMaxLabelBytes = 4096;                   // a .cls number or a .txt class name
constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;  // one image file in a shard

// A shard opened for reading; closed when destroyed.
class ShardFile {
 public:
  ShardFile(const std::string& path, const char* op) : path_(path), op_(op) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    VIT_CHECK(fd_ >= 0, op, "{}: cannot open ({})", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fail(op, "{}: not a regular file", path);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ShardFile() { ::close(fd_); }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  uint64_t size() const { return size_; }
  // Exactly n bytes at offset, or a clear error (the file shrank since it was listed).
  void read(uint64_t offset, uint8_t* out, size_t n) const {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      VIT_CHECK(got > 0, op_, "{}: cannot read {} bytes at byte {} ({})", path_, n, offset,
                got < 0 ? std::strerror(errno) : "the file is shorter than when it was listed");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  const char* op_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Header reads through a small window: a sample's label usually lies in the blocks after its header.
class WindowReader {
 public:
  explicit WindowReader(const ShardFile& file) : file_(file) {}
  void read(uint64_t offset, uint8_t* out, size_t n) {
    if (n > sizeof(buffer_)) return file_.read(offset, out, n);
    if (offset < start_ || offset + n > start_ + length_) {
      start_ = offset;
      length_ = static_cast<size_t>(std::min<uint64_t>(sizeof(buffer_), file_.size() - offset));
      file_.read(start_, buffer_, length_);
    }
    std::memcpy(out, buffer_ + (offset - start_), n);
  }

 private:
  const ShardFile& file_;
  uint8_t buffer_[4096];
  uint64_t start_ = 0;
  size_t length_ = 0;
};

std::string trimmed(std::string s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  return s.substr(i);
}

constexpr const char* kImageExtensions[] = {"jpg", "jpeg", "png", "bmp"};

// What a sample's label says before the class list is known.
struct RawLabel {
  bool by_name = false;
  int64_t number = -1;
  std::string name;
};

}  // namespace

std::vector<std::string> find_shards(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> shards;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return shards;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + 5 && name.compare(0, prefix.size() + 1, prefix + "-") == 0 &&
        name.compare(name.size() - 4, 4, ".tar") == 0) {
      shards.push_back(entry.path().string());
    }
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

namespace {

// One shard's samples: where each image lies (appended to d.members as shard `s`) and its label as
// written (appended to raw). Reads only headers and labels.
void list_shard(const TarRead& read, uint64_t archive_size, const std::string& name, uint32_t s, Dataset& d,
                std::vector<RawLabel>& raw, int64_t& skipped_entries) {
  const char* op = "shards";
  int64_t skipped = 0;
  const std::vector<TarMember> members = read_tar_members(read, archive_size, name, &skipped);
  skipped_entries += skipped;
  for (const TarSample& sample : group_samples(members, name)) {
    const TarMember* image = nullptr;
    for (const char* ext : kImageExtensions) {
      for (const auto& [extension, index] : sample.parts) {
        if (!image && extension == ext) image = &members[index];
      }
    }
    std::string extensions;
    for (const auto& part : sample.parts) extensions += (extensions.empty() ? "." : ", .") + part.first;
    VIT_CHECK(image, op, "{}: sample '{}' has no image file (.jpg, .jpeg, .png or .bmp); it has {}", name, sample.key,
              extensions);
    VIT_CHECK(image->size <= kMaxImageFileBytes, op, "{}: sample '{}': its image file is {} bytes (at most {})", name,
              sample.key, image->size, kMaxImageFileBytes);
    const TarMember *cls = nullptr, *txt = nullptr;
    for (const auto& [extension, index] : sample.parts) {
      if (extension == "cls") cls = &members[index];
      if (extension == "txt") txt = &members[index];
    }
    const TarMember* label = cls ? cls : txt;
    VIT_CHECK(label, op, "{}: sample '{}' has no label (a .cls number or a .txt class name); it has {}", name,
              sample.key, extensions);
    VIT_CHECK(label->size <= kMaxLabelBytes, op, "{}: sample '{}': its .{} label is {} bytes (at most {})", name,
              sample.key, cls ? "cls" : "txt", label->size, kMaxLabelBytes);
    std::string text(static_cast<size_t>(label->size), '\0');
    if (!text.empty()) read(label->offset, reinterpret_cast<uint8_t*>(text.data()), text.size());
    text = trimmed(text);
    RawLabel l;
    if (cls) {
      const bool digits = !text.empty() && text.size() <= 9 &&
                          std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
      VIT_CHECK(digits, op, "{}: sample '{}': its .cls label '{}' is not a class number (0, 1, ...)", name, sample.key,
                text.substr(0, 40));
      l.number = std::stoll(text);
    } else {
      VIT_CHECK(!text.empty(), op, "{}: sample '{}': its .txt label is empty", name, sample.key);
      l.by_name = true;
      l.name = std::move(text);
    }
    raw.push_back(std::move(l));
    d.members.push_back({s, image->offset, image->size});
  }
}

// The labels as positions in the class list: classes_file's names, else the labels' own names or numbers.
void resolve_labels(Dataset& d, const std::vector<RawLabel>& raw, const std::string& classes_file) {
  const char* op = "shards";
  VIT_CHECK(!raw.empty(), op, "{}: no samples (an image file and a .cls or .txt label with one key)", d.source);
  d.class_names = classes_file.empty() ? std::vector<std::string>{} : read_names_file(classes_file);
  const std::string named_by = classes_file.empty() ? "the labels" : classes_file;
  const bool any_names = std::any_of(raw.begin(), raw.end(), [](const RawLabel& l) { return l.by_name; });
  const bool any_numbers = std::any_of(raw.begin(), raw.end(), [](const RawLabel& l) { return !l.by_name; });
  if (d.class_names.empty()) {
    VIT_CHECK(!(any_names && any_numbers), op,
              "{}: some samples are labelled by .cls numbers and others by .txt names: give their class names in {}",
              d.source, classes_file.empty() ? "classes.txt" : classes_file);
    if (any_names) {
      std::set<std::string> names;
      for (const RawLabel& l : raw) names.insert(l.name);
      d.class_names.assign(names.begin(), names.end());
    } else {
      int64_t top = 0;
      for (const RawLabel& l : raw) top = std::max(top, l.number);
      VIT_CHECK(top < (int64_t{1} << 20), op, "{}: class number {}: at most 2^20 classes", d.source, top);
      for (int64_t k = 0; k <= top; ++k) d.class_names.push_back(std::to_string(k));
    }
  }
  std::map<std::string, int64_t> position;
  for (size_t k = 0; k < d.class_names.size(); ++k) position[d.class_names[k]] = static_cast<int64_t>(k);
  d.labels.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawLabel& l = raw[i];
    if (l.by_name) {
      const auto it = position.find(l.name);
      VIT_CHECK(it != position.end(), op, "{}: class '{}' is not one of the {} classes of {}",
                d.image_name(static_cast<int64_t>(i)), l.name, d.class_names.size(), named_by);
      d.labels.push_back(it->second);
    } else {
      VIT_CHECK(l.number < static_cast<int64_t>(d.class_names.size()), op,
                "{}: class number {} is not below the {} classes of {}", d.image_name(static_cast<int64_t>(i)),
                l.number, d.class_names.size(), named_by);
      d.labels.push_back(l.number);
    }
  }
}

}  // namespace

Dataset load_shards(const std::vector<std::string>& shards, const std::string& classes_file, int64_t channels,
                    int64_t size, int64_t max_pixels, Residency residency, const ImageShaper& shaper) {
  const char* op = "shards";
  VIT_CHECK(!shards.empty(), op, "no shard files given");
  VIT_CHECK((channels == 1 || channels == 3) && size > 0, op, "invalid target {} channels, size {}", channels, size);
  VIT_CHECK(shards.size() < (uint64_t{1} << 32), op, "{} shards: at most 2^32 are supported", shards.size());
  Dataset d;
  d.channels = channels;
  d.height = d.width = size;
  d.max_pixels = max_pixels;
  d.shaper = shaper;
  d.shards = shards;
  d.source = shards.size() == 1 ? shards.front() : shard_pattern(shards);
  std::vector<RawLabel> raw;
  int64_t skipped_entries = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const ShardFile file(shards[s], op);
    WindowReader window(file);
    list_shard([&window](uint64_t offset, uint8_t* out, size_t n) { window.read(offset, out, n); }, file.size(),
               shards[s], static_cast<uint32_t>(s), d, raw, skipped_entries);
  }
  if (skipped_entries > 0) {
    d.skipped.push_back(fmt::format("{} tar entries that are not regular files (directories, links)", skipped_entries));
  }
  resolve_labels(d, raw, classes_file);
  const double count = static_cast<double>(d.members.size()), image_bytes = static_cast<double>(d.image_bytes());
  if (streams(count * image_bytes, residency)) return d;
  check_fits_in_memory(count * image_bytes,
                       fmt::format("{}: {:.0f} images at {}x{}x{}", d.source, count, channels, size, size),
                       " (--data-residency memory holds them in memory; stream decodes them batch by batch)");
  std::vector<uint8_t> pixels(static_cast<size_t>(count * image_bytes));
  for (int64_t i = 0; i < d.size(); ++i) d.read(i, pixels.data() + static_cast<size_t>(i) * d.image_bytes());
  d.pixels = std::move(pixels);
  return d;
}

Dataset list_shard_bytes(const uint8_t* bytes, size_t size, const std::string& name) {
  Dataset d;
  d.shards = {name};
  d.source = name;
  std::vector<RawLabel> raw;
  int64_t skipped = 0;
  list_shard([bytes](uint64_t offset, uint8_t* out, size_t n) { std::memcpy(out, bytes + offset, n); }, size, name, 0,
             d, raw, skipped);
  resolve_labels(d, raw, "");
  return d;
}

std::vector<uint8_t> read_shard_member(const Dataset& d, int64_t i) {
  VIT_CHECK(i >= 0 && i < static_cast<int64_t>(d.members.size()), "shards", "{}: image {} out of range", d.source, i);
  const ShardMember& m = d.members[static_cast<size_t>(i)];
  const ShardFile file(d.shards.at(m.shard), "shards");
  VIT_CHECK(m.offset <= file.size() && m.size <= file.size() - m.offset, "shards",
            "{}: the file at byte {} ends past the shard's end (changed since it was listed?)", d.shards[m.shard],
            m.offset);
  std::vector<uint8_t> bytes(static_cast<size_t>(m.size));
  file.read(m.offset, bytes.data(), bytes.size());
  return bytes;
}

std::string shard_pattern(const std::vector<std::string>& shards) {
  if (shards.size() == 1) return shards.front();
  if (shards.empty()) return "";
  const std::string& a = shards.front();
  const std::string& b = shards.back();
  // The common prefix and suffix; the middles are the numbers.
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  while (pre > 0 && a[pre - 1] >= '0' && a[pre - 1] <= '9') --pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  while (suf > 0 && a[a.size() - suf] >= '0' && a[a.size() - suf] <= '9') --suf;
  return fmt::format("{}{{{}..{}}}{} ({} shards)", a.substr(0, pre), a.substr(pre, a.size() - pre - suf),
                     b.substr(pre, b.size() - pre - suf), a.substr(a.size() - suf), shards.size());
}

}  // namespace vit::data
