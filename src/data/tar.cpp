// Tar members, WebDataset samples and a ustar writer (see tar.h). The format's facts (512-byte
// blocks, the ustar field offsets, octal and base-256 numbers, pax "LEN key=value\n" records, GNU
// 'L' long names) are POSIX's pax specification and GNU tar's manual; the code is our own.
#include "data/tar.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/check.h"

namespace vit::data {
namespace {

constexpr size_t kNameAt = 0, kNameLen = 100, kSizeAt = 124, kSizeLen = 12, kSumAt = 148, kSumLen = 8, kTypeAt = 156,
                 kMagicAt = 257, kPrefixAt = 345, kPrefixLen = 155;

uint64_t padded(uint64_t size) { return (size + kTarBlock - 1) / kTarBlock * kTarBlock; }

std::string field_string(const uint8_t* p, size_t len) {
  size_t n = 0;
  while (n < len && p[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(p), n);
}

// An octal number (leading spaces, then digits, ended by a space or NUL or the field's end), or
// GNU's base-256 form (first byte's top bit set). False when the field is neither.
bool parse_number(const uint8_t* p, size_t len, uint64_t& out) {
  out = 0;
  if (p[0] & 0x80) {
    if (p[0] == 0xFF) return false;  // negative
    uint64_t v = p[0] & 0x7F;
    for (size_t i = 1; i < len; ++i) {
      if (v > (std::numeric_limits<uint64_t>::max() >> 8)) return false;
      v = (v << 8) | p[i];
    }
    out = v;
    return true;
  }
  size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  bool digits = false;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (out > (std::numeric_limits<uint64_t>::max() >> 3)) return false;
    out = out * 8 + static_cast<uint64_t>(p[i] - '0');
    digits = true;
  }
  for (; i < len; ++i) {
    if (p[i] != ' ' && p[i] != 0) return false;
  }
  return digits;
}

bool all_zero(const uint8_t* p) {
  return std::all_of(p, p + kTarBlock, [](uint8_t b) { return b == 0; });
}

bool checksum_ok(const uint8_t* h) {
  uint64_t stored = 0;
  if (!parse_number(h + kSumAt, kSumLen, stored)) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    const uint8_t b = i >= kSumAt && i < kSumAt + kSumLen ? ' ' : h[i];
    unsigned_sum += b;
    signed_sum += static_cast<int8_t>(b);
  }
  return stored == unsigned_sum || static_cast<int64_t>(stored) == signed_sum;  // old tars summed signed bytes
}

// A pax extended header's records; "path" and "size" are the ones a reader of samples needs.
void parse_pax(const std::string& text, const std::string& name, uint64_t at, std::string& path, bool& has_path,
               uint64_t& size, bool& has_size) {
  auto bad = [&](const char* what) { fail("tar", "{}: malformed pax header at byte {} ({})", name, at, what); };
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == 0) break;  // padding
    size_t j = i;
    uint64_t len = 0;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') {
      if (len > 1'000'000'000) bad("a record length too large");
      len = len * 10 + static_cast<uint64_t>(text[j] - '0');
      ++j;
    }
    if (j == i || j >= text.size() || text[j] != ' ') bad("a record without its length");
    if (len <= j - i + 1 || len > text.size() - i) bad("a record length past the header's end");
    const size_t end = i + static_cast<size_t>(len);  // one past the record's '\n'
    if (text[end - 1] != '\n') bad("a record not ended by a newline");
    const std::string record = text.substr(j + 1, end - 1 - (j + 1));
    const size_t eq = record.find('=');
    if (eq == std::string::npos || eq == 0) bad("a record without key=value");
    const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      path = value;
      has_path = true;
    } else if (key == "size") {
      uint64_t v = 0;
      if (value.empty() || value.size() > 19) bad("a size that is not a number");
      for (char c : value) {
        if (c < '0' || c > '9') bad("a size that is not a number");
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      size = v;
      has_size = true;
    }
    i = end;
  }
}

}  // namespace

std::vector<TarMember> read_tar_members(const TarRead& read, uint64_t archive_size, const std::string& name,
                                        int64_t* skipped) {
  std::vector<TarMember> members;
  std::array<uint8_t, kTarBlock> h{};
  std::string next_path;
  bool has_next_path = false, has_next_size = false;
  uint64_t next_size = 0;
  uint64_t at = 0;
  if (skipped) *skipped = 0;
  while (at < archive_size) {
    if (archive_size - at < kTarBlock) {
      fail("tar", "{}: truncated: {} bytes at byte {} are not a whole 512-byte header", name, archive_size - at, at);
    }
    read(at, h.data(), kTarBlock);
    if (all_zero(h.data())) break;  // the end-of-archive blocks
    if (!checksum_ok(h.data())) {
      fail("tar", "{}: not a tar archive, or corrupt: the header at byte {} fails its checksum", name, at);
    }
    uint64_t size = 0;
    if (!parse_number(h.data() + kSizeAt, kSizeLen, size)) {
      fail("tar", "{}: the header at byte {} has a size that is not a number", name, at);
    }
    const char type = static_cast<char>(h[kTypeAt]);
    const bool regular = type == '0' || type == 0 || type == '7';
    const bool no_data = type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6';
    if (regular && has_next_size) size = next_size;
    const uint64_t data_at = at + kTarBlock;
    const uint64_t data_size = no_data ? 0 : size;
    if (data_size > archive_size - data_at) {
      fail("tar", "{}: truncated: the member at byte {} declares {} bytes, but only {} remain", name, at, data_size,
           archive_size - data_at);
    }
    if (type == 'x' || type == 'L') {
      if (data_size > kMaxTarMetaBytes) {
        fail("tar", "{}: the {} at byte {} declares {} bytes (at most {})", name,
             type == 'x' ? "pax header" : "GNU long name", at, data_size, kMaxTarMetaBytes);
      }
      std::string text(static_cast<size_t>(data_size), '\0');
      if (data_size > 0) read(data_at, reinterpret_cast<uint8_t*>(text.data()), text.size());
      if (type == 'x') {
        parse_pax(text, name, at, next_path, has_next_path, next_size, has_next_size);
      } else {
        next_path = text.substr(0, text.find('\0'));
        has_next_path = true;
      }
    } else if (regular) {
      std::string path;
      if (has_next_path) {
        path = next_path;
      } else {
        path = field_string(h.data() + kNameAt, kNameLen);
        const bool posix = std::memcmp(h.data() + kMagicAt, "ustar\0", 6) == 0;
        const std::string prefix = posix ? field_string(h.data() + kPrefixAt, kPrefixLen) : "";
        if (!prefix.empty()) path = prefix + "/" + path;
      }
      members.push_back({std::move(path), data_at, size});
      has_next_path = has_next_size = false;
    } else {
      if (type != 'g' && skipped) ++*skipped;  // directories, links, devices, sparse files, ...
      if (type != 'g') has_next_path = has_next_size = false;
    }
    const uint64_t step = padded(data_size);
    at = step > archive_size - data_at ? archive_size : data_at + step;  // the last member's padding may be cut
  }
  return members;
}

std::vector<TarMember> read_tar_members(const uint8_t* bytes, size_t size, const std::string& name) {
  return read_tar_members([bytes](uint64_t offset, uint8_t* out, size_t n) { std::memcpy(out, bytes + offset, n); },
                          size, name);
}

bool split_sample_name(const std::string& path, std::string& key, std::string& extension) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find('.', base);
  if (dot == std::string::npos || dot == base || dot + 1 == path.size()) return false;
  key = path.substr(0, dot);
  extension = path.substr(dot + 1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

std::vector<TarSample> group_samples(const std::vector<TarMember>& members, const std::string& name) {
  std::vector<TarSample> samples;
  std::unordered_set<std::string> done;
  for (size_t i = 0; i < members.size(); ++i) {
    std::string key, extension;
    if (!split_sample_name(members[i].name, key, extension)) continue;
    if (samples.empty() || samples.back().key != key) {
      if (!samples.empty()) done.insert(samples.back().key);
      VIT_CHECK(!done.count(key), "tar",
                "{}: sample '{}' appears again at byte {} after other samples (a sample's files must be adjacent)",
                name, key, members[i].offset);
      samples.push_back({key, {}});
    }
    for (const auto& part : samples.back().parts) {
      VIT_CHECK(part.first != extension, "tar", "{}: sample '{}' has two .{} files (the second at byte {})", name, key,
                extension, members[i].offset);
    }
    samples.back().parts.emplace_back(extension, i);
  }
  return samples;
}

void TarWriter::add(const std::string& name, const uint8_t* data, size_t size) {
  VIT_CHECK(!name.empty() && name.size() < kNameLen, "tar", "member name '{}' is not 1-99 bytes", name);
  VIT_CHECK(size < (uint64_t{1} << 33), "tar", "member '{}' is {} bytes: ustar holds at most 8 GiB", name, size);
  std::array<uint8_t, kTarBlock> h{};
  std::memcpy(h.data() + kNameAt, name.data(), name.size());
  auto octal = [&h](size_t at, size_t digits, uint64_t v) {
    for (size_t i = digits; i-- > 0; v >>= 3) h[at + i] = static_cast<uint8_t>('0' + (v & 7));
  };
  octal(100, 7, 0644);  // mode
  octal(108, 7, 0);     // uid
  octal(116, 7, 0);     // gid
  octal(kSizeAt, 11, size);
  octal(136, 11, 0);  // mtime: 0, so the same files give the same archive
  h[kTypeAt] = '0';
  std::memcpy(h.data() + kMagicAt,
              "ustar\0"
              "00",
              8);
  std::memset(h.data() + kSumAt, ' ', kSumLen);
  uint64_t sum = 0;
  for (uint8_t b : h) sum += b;
  octal(kSumAt, 6, sum);
  h[kSumAt + 6] = 0;
  sink_(h.data(), h.size());
  if (size > 0) sink_(data, size);
  static const std::array<uint8_t, kTarBlock> zeros{};
  const uint64_t pad = padded(size) - size;
  if (pad > 0) sink_(zeros.data(), static_cast<size_t>(pad));
  bytes_ += kTarBlock + padded(size);
}

void TarWriter::finish() {
  static const std::array<uint8_t, kTarBlock> zeros{};
  sink_(zeros.data(), zeros.size());
  sink_(zeros.data(), zeros.size());
  bytes_ += 2 * kTarBlock;
}

}  // namespace vit::data
