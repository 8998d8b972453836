// Reading zip archives (PKZIP: what torch.save (PyTorch >= 1.6) and numpy.savez write), through
// zlib's minizip (Debian's libminizip) over memory: the archive is memory-mapped once, minizip
// walks its central directory and checks each local header, and we add what a reader of files
// from strangers needs on top:
//   - entry names: no empty, absolute ("/x"), backslash or ".." names, no name twice; each
//     entry's local header must agree with the central directory (name, method, sizes and CRC,
//     as Python's zipfile checks the name), and no entry's bytes may overlap another's: an entry
//     never reads another entry's bytes;
//   - methods: stored or deflated only, no encryption;
//   - stored entries are returned in place (a view into the mapping: no copy) once their bytes
//     lie inside the archive and match their recorded CRC-32;
//   - deflated entries are inflated into memory under a budget for the whole archive
//     (kInflateFloorBytes + kInflateRatio x the archive's size): a declared size over the budget
//     is refused before anything is allocated, and an entry that inflates to more than it
//     declares is refused as soon as it does (a zip bomb costs nothing but its own file size).
// Errors: vit::Error "[zip] NAME: what is wrong" (NAME: the path, then ": entry" where it helps;
// entry names as core/printable.h shows them). Finding an entry by name is a hash lookup.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace vit::io {

inline constexpr uint64_t kInflateFloorBytes = 64ull << 20;  // 64 MiB
inline constexpr uint64_t kInflateRatio = 40;                // real weights deflate ~1.1x; zeros ~1000x

struct ZipEntry {
  std::string name;
  uint64_t size = 0;             // uncompressed, as the central directory records it
  uint64_t compressed_size = 0;  // as stored
  uint32_t crc = 0;
  bool deflated = false;       // else stored
  uint64_t data_offset = 0;    // where the (compressed) bytes start in the archive
  uint64_t header_offset = 0;  // where its local header starts
};

// An entry's bytes: `data` stays valid while `owner` lives. mapped: a view into the archive's
// private file mapping (Tensor::from_blob(..., file_mapped=true) may borrow it).
struct ZipBytes {
  const char* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<void> owner;
  bool mapped = false;
};

class ZipArchive {
 public:
  // Memory-maps path (private, copy-on-write) and reads its directory. Throws "[zip] PATH: ...".
  static ZipArchive open(const std::string& path);
  // The same over bytes in memory (fuzzing, tests); `name` names it in messages.
  static ZipArchive from_bytes(std::shared_ptr<std::vector<char>> bytes, const std::string& name);

  const std::string& name() const { return name_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& entry_name) const;  // nullptr when absent
  // The entry's bytes, checked against its CRC-32. visit (optional) sees them block by block (1 MiB,
  // offsets from the entry's start) right after each block's CRC, while it is in cache; a large
  // entry is read by several threads, so visit may run concurrently for different blocks.
  using BlockVisitor = std::function<void(const char* block, uint64_t offset, uint64_t size)>;
  ZipBytes read(const ZipEntry& entry, const BlockVisitor& visit = {}) const;
  uint64_t archive_size() const { return size_; }

 private:
  ZipArchive() = default;
  void scan();
  ZipEntry current_entry(void* zip, uint64_t index);  // zip: minizip's unzFile
  void check_local_header(ZipEntry& e, uint64_t extra_bytes);
  void check_no_overlap() const;
  std::string name_;
  std::shared_ptr<void> owner_;
  const char* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // entry name -> its place in entries_
  std::shared_ptr<uint64_t> inflated_;             // bytes inflated so far (shared by copies of the archive)
};

// True when the bytes start like a zip archive (a local file header, or an empty archive's end record).
bool looks_like_zip(const char* data, uint64_t size);

}  // namespace vit::io
