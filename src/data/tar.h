// Tar archives as WebDataset shards use them: the members of a POSIX/ustar, pax or GNU tar read
// from their headers (the data stays on disk; only where each member's bytes lie is kept), grouped
// into samples by key, and written back as plain ustar. The reader refuses a malformed archive
// (a bad header checksum, a size that is not a number, a member running past the end of the file,
// a pax record that does not parse) naming the archive and the byte offset; it never reads past
// what the archive's size allows. Fuzzed (tests/fuzz/fuzz_tar.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vit::data {

inline constexpr uint64_t kTarBlock = 512;
// A pax extended header or a GNU long name larger than this is refused (a real one is a few
// hundred bytes; a hostile one could ask for gigabytes).
inline constexpr uint64_t kMaxTarMetaBytes = 1 << 20;

// A regular file of the archive: its path and where its bytes lie.
struct TarMember {
  std::string name;
  uint64_t offset = 0, size = 0;
};

// Reads `size` bytes at `offset` into `out`; the archive's bytes (a file, or memory).
using TarRead = std::function<void(uint64_t offset, uint8_t* out, size_t size)>;

// The regular files of an archive of `archive_size` bytes, in archive order. Directories, links
// and other entries are skipped (counted in `skipped` when given); pax 'path'/'size' records and
// GNU long names ('L') apply to the next member; the archive ends at its first zero block or at
// its end on a block boundary. Throws "[tar] NAME: ..." naming the offset of what is wrong.
std::vector<TarMember> read_tar_members(const TarRead& read, uint64_t archive_size, const std::string& name,
                                        int64_t* skipped = nullptr);
// The same over bytes in memory (the fuzz target's door).
std::vector<TarMember> read_tar_members(const uint8_t* bytes, size_t size, const std::string& name);

// WebDataset's rule for a member's sample: the key is the path up to the first dot of its file
// name, the extension what follows ("a/b.seg.png" -> "a/b", "seg.png"). False for names without
// one (no dot, or a dot first: hidden files), which belong to no sample.
bool split_sample_name(const std::string& path, std::string& key, std::string& extension);

// One sample: consecutive members sharing a key, by lower-cased extension.
struct TarSample {
  std::string key;
  std::vector<std::pair<std::string, size_t>> parts;  // (extension, index into the members)
};
// Groups members into samples as WebDataset does (consecutive members with one key). A key seen
// again after another key's members, or one extension twice in a sample, is refused.
std::vector<TarSample> group_samples(const std::vector<TarMember>& members, const std::string& name);

// Writes a ustar archive member by member (names up to 100 bytes, mtime 0, mode 0644: the same
// files give the same archive), then the two zero blocks.
class TarWriter {
 public:
  explicit TarWriter(std::function<void(const void*, size_t)> sink) : sink_(std::move(sink)) {}
  void add(const std::string& name, const uint8_t* data, size_t size);
  void finish();
  uint64_t bytes() const { return bytes_; }

 private:
  std::function<void(const void*, size_t)> sink_;
  uint64_t bytes_ = 0;
};

}  // namespace vit::data
