// Zip archives through minizip over memory (see zip.h).
#include "io/zip.h"

#include <omp.h>
#include <unzip.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/printable.h"
#include "io/mapped_file.h"

namespace vit::io {
namespace {

constexpr size_t kMaxEntries = 1'000'000;
constexpr size_t kMaxNameBytes = 4096;

// minizip's file functions over a block of memory: each "open" is a cursor over the same bytes.
struct MemoryStream {
  const char* data;
  uint64_t size;
  uint64_t pos = 0;
};
struct MemorySource {
  const char* data;
  uint64_t size;
};

voidpf ZCALLBACK memory_open(voidpf opaque, const void* /*filename*/, int mode) {
  if ((mode & ZLIB_FILEFUNC_MODE_READWRITEFILTER) != ZLIB_FILEFUNC_MODE_READ) return nullptr;
  const auto* source = static_cast<const MemorySource*>(opaque);
  return new MemoryStream{source->data, source->size};
}
uLong ZCALLBACK memory_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<MemoryStream*>(stream);
  const uint64_t n = std::min<uint64_t>(size, s->pos < s->size ? s->size - s->pos : 0);
  if (n > 0) std::memcpy(buf, s->data + s->pos, n);
  s->pos += n;
  return static_cast<uLong>(n);
}
uLong ZCALLBACK memory_write(voidpf, voidpf, const void*, uLong) { return 0; }
ZPOS64_T ZCALLBACK memory_tell(voidpf, voidpf stream) { return static_cast<MemoryStream*>(stream)->pos; }
long ZCALLBACK memory_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<MemoryStream*>(stream);
  uint64_t from = 0;
  if (origin == ZLIB_FILEFUNC_SEEK_CUR) from = s->pos;
  if (origin == ZLIB_FILEFUNC_SEEK_END) from = s->size;
  if (offset > s->size || from > s->size - offset) return -1;  // past the end: an error, not a hole
  s->pos = from + offset;
  return 0;
}
int ZCALLBACK memory_close(voidpf, voidpf stream) {
  delete static_cast<MemoryStream*>(stream);
  return 0;
}
int ZCALLBACK memory_error(voidpf, voidpf) { return 0; }

zlib_filefunc64_def memory_functions(MemorySource* source) {
  zlib_filefunc64_def functions{};
  functions.zopen64_file = memory_open;
  functions.zread_file = memory_read;
  functions.zwrite_file = memory_write;
  functions.ztell64_file = memory_tell;
  functions.zseek64_file = memory_seek;
  functions.zclose_file = memory_close;
  functions.zerror_file = memory_error;
  functions.opaque = source;
  return functions;
}

// Names a reader of our own files would trust blindly: refused.
std::string bad_name_reason(const std::string& n) {
  if (n.empty()) return "an empty name";
  if (n.size() > kMaxNameBytes) return "a name longer than 4096 bytes";
  if (n.find('\0') != std::string::npos) return "a NUL byte in the name";
  if (n.front() == '/') return "an absolute path";
  if (n.find('\\') != std::string::npos) return "a backslash in the name";
  size_t start = 0;
  while (start <= n.size()) {
    const size_t end = std::min(n.find('/', start), n.size());
    if (n.compare(start, end - start, "..") == 0) return "a '..' path component";
    start = end + 1;
  }
  return "";
}

}  // namespace

bool looks_like_zip(const char* data, uint64_t size) {
  return size >= 4 && (std::memcmp(data, "PK\x03\x04", 4) == 0 || std::memcmp(data, "PK\x05\x06", 4) == 0);
}

ZipArchive ZipArchive::open(const std::string& path) {
  const MappedFile file = map_file(path, "zip");
  ZipArchive a;
  a.name_ = path;
  a.owner_ = file.owner;
  a.base_ = file.data;
  a.size_ = file.size;
  a.mapped_ = true;
  a.scan();
  return a;
}

ZipArchive ZipArchive::from_bytes(std::shared_ptr<std::vector<char>> bytes, const std::string& name) {
  ZipArchive a;
  a.name_ = name;
  a.base_ = bytes->data();
  a.size_ = bytes->size();
  a.owner_ = std::static_pointer_cast<void>(bytes);
  a.scan();
  return a;
}

void ZipArchive::scan() {
  inflated_ = std::make_shared<uint64_t>(0);
  MemorySource source{base_, size_};
  zlib_filefunc64_def functions = memory_functions(&source);
  unzFile zip = unzOpen2_64("memory", &functions);
  VIT_CHECK(zip != nullptr, "zip",
            "{}: not a readable zip archive (no valid end-of-central-directory record: "
            "truncated, or not a zip file)",
            name_);
  struct Closer {
    unzFile z;
    ~Closer() { unzClose(z); }
  } closer{zip};
  unz_global_info64 global{};
  VIT_CHECK(unzGetGlobalInfo64(zip, &global) == UNZ_OK, "zip", "{}: unreadable central directory", name_);
  VIT_CHECK(global.number_entry <= kMaxEntries, "zip", "{}: {} entries (at most {} are read)", name_,
            global.number_entry, kMaxEntries);
  uint64_t declared_inflated = 0;
  const uint64_t budget = kInflateFloorBytes + kInflateRatio * size_;
  int rc = unzGoToFirstFile(zip);
  for (uint64_t i = 0; i < global.number_entry; ++i) {
    VIT_CHECK(rc == UNZ_OK, "zip",
              "{}: the central directory ends after {} of its {} entries (the archive is truncated or corrupt)", name_,
              i, global.number_entry);
    ZipEntry e = current_entry(zip, i);
    if (e.deflated) {
      declared_inflated += e.size;
      VIT_CHECK(e.size <= budget && declared_inflated <= budget, "zip",
                "{}: entry '{}' declares {} bytes uncompressed: over the {}-byte budget for a {}-byte archive (a zip "
                "bomb?)",
                name_, printable(e.name), e.size, budget, size_);
    }
    entries_.push_back(std::move(e));
    rc = unzGoToNextFile(zip);
  }
  VIT_CHECK(rc == UNZ_END_OF_LIST_OF_FILE, "zip", "{}: the central directory holds more entries than it declares ({})",
            name_, global.number_entry);
  check_no_overlap();
}

// The central directory's entry `i` (minizip's current one), its name and local header checked.
ZipEntry ZipArchive::current_entry(void* zip, uint64_t i) {
  unz_file_info64 info{};
  std::string entry_name(kMaxNameBytes + 1, '\0');
  VIT_CHECK(unzGetCurrentFileInfo64(zip, &info, entry_name.data(), entry_name.size(), nullptr, 0, nullptr, 0) == UNZ_OK,
            "zip", "{}: entry {} of the central directory is unreadable", name_, i);
  VIT_CHECK(info.size_filename <= kMaxNameBytes, "zip", "{}: entry {} has a {}-byte name (at most {})", name_, i,
            info.size_filename, kMaxNameBytes);
  entry_name.resize(info.size_filename);
  const std::string why = bad_name_reason(entry_name);
  VIT_CHECK(why.empty(), "zip", "{}: entry '{}' is refused: {}", name_, printable(entry_name), why);
  VIT_CHECK(index_.emplace(entry_name, entries_.size()).second, "zip",
            "{}: entry '{}' appears twice (which one a reader takes is ambiguous)", name_, printable(entry_name));
  VIT_CHECK((info.flag & 1u) == 0, "zip", "{}: entry '{}' is encrypted", name_, printable(entry_name));
  VIT_CHECK(info.compression_method == 0 || info.compression_method == Z_DEFLATED, "zip",
            "{}: entry '{}' uses compression method {} (stored (0) and deflate (8) are read)", name_,
            printable(entry_name), info.compression_method);
  // minizip checks the local header's method (and, unless a data descriptor holds them, its sizes
  // and CRC) against the central one here, and says where the data starts.
  VIT_CHECK(unzOpenCurrentFile(zip) == UNZ_OK, "zip",
            "{}: entry '{}': its local header is missing or disagrees with the central directory", name_,
            printable(entry_name));
  ZipEntry e;
  e.name = entry_name;
  e.size = info.uncompressed_size;
  e.compressed_size = info.compressed_size;
  e.crc = static_cast<uint32_t>(info.crc);
  e.deflated = info.compression_method == Z_DEFLATED;
  e.data_offset = unzGetCurrentFileZStreamPos64(zip);
  const int local_extra = unzGetLocalExtrafield(zip, nullptr, 0);
  unzCloseCurrentFile(zip);
  check_local_header(e, static_cast<uint64_t>(std::max(local_extra, 0)));
  VIT_CHECK(e.deflated || e.size == e.compressed_size, "zip",
            "{}: entry '{}' is stored (not compressed) but records {} bytes compressed and {} uncompressed", name_,
            printable(e.name), e.compressed_size, e.size);
  return e;
}

namespace {

uint64_t le_at(const char* p, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}

}  // namespace

// The entry's local header (30 bytes, its name and extra field just before its data) against the
// central directory: the same name, method, CRC and sizes (zero where a data descriptor after the
// data holds them, all ones where a zip64 field does). Python's zipfile compares the names too.
void ZipArchive::check_local_header(ZipEntry& e, uint64_t extra_bytes) {
  const uint64_t header_bytes = 30 + e.name.size() + extra_bytes;
  VIT_CHECK(e.data_offset >= header_bytes && e.data_offset <= size_ && e.compressed_size <= size_ - e.data_offset,
            "zip", "{}: entry '{}': its {} bytes at offset {} run past the end of the {}-byte archive", name_,
            printable(e.name), e.compressed_size, e.data_offset, size_);
  e.header_offset = e.data_offset - header_bytes;
  const char* h = base_ + e.header_offset;
  const std::string local_name(h + 30, e.name.size());
  VIT_CHECK(std::memcmp(h, "PK\x03\x04", 4) == 0 && local_name == e.name, "zip",
            "{}: entry '{}': its local header names '{}' (the central directory and the local header disagree: its "
            "bytes may be another entry's)",
            name_, printable(e.name), printable(local_name));
  const bool descriptor = (le_at(h + 6, 2) & 8u) != 0;
  const auto agrees = [descriptor](uint64_t local, uint64_t central, bool size) {
    return local == (central & 0xffffffffu) || (descriptor && local == 0) || (size && local == 0xffffffffu);
  };
  const uint64_t method = le_at(h + 8, 2), crc = le_at(h + 14, 4), packed = le_at(h + 18, 4), size = le_at(h + 22, 4);
  VIT_CHECK(method == (e.deflated ? 8u : 0u), "zip",
            "{}: entry '{}': its local header records compression method {}, the central directory {}", name_,
            printable(e.name), method, e.deflated ? 8 : 0);
  VIT_CHECK(agrees(crc, e.crc, false), "zip",
            "{}: entry '{}': its local header records CRC-32 {:08x}, the central directory {:08x}", name_,
            printable(e.name), crc, e.crc);
  VIT_CHECK(agrees(packed, e.compressed_size, true) && agrees(size, e.size, true), "zip",
            "{}: entry '{}': its local header records {} bytes uncompressed, the central directory {} ({} and {} "
            "compressed)",
            name_, printable(e.name), size, e.size, packed, e.compressed_size);
}

// No entry's local header or bytes lie inside another's: one entry never reads another's bytes.
void ZipArchive::check_no_overlap() const {
  std::vector<const ZipEntry*> order;
  order.reserve(entries_.size());
  for (const ZipEntry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->header_offset < b->header_offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const ZipEntry& a = *order[k - 1];
    const ZipEntry& b = *order[k];
    VIT_CHECK(b.header_offset >= a.data_offset + a.compressed_size, "zip",
              "{}: entries '{}' and '{}' overlap ('{}' starts at byte {}, inside the bytes of '{}', which end at byte "
              "{}): an entry must not read another's bytes",
              name_, printable(a.name), printable(b.name), printable(b.name), b.header_offset, printable(a.name),
              a.data_offset + a.compressed_size);
  }
}

const ZipEntry* ZipArchive::find(const std::string& entry_name) const {
  const auto it = index_.find(entry_name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

namespace {

// The CRC-32 of bytes, handed to visit block by block just after each block's CRC. A large entry
// is cut into one run of blocks per thread (CRCs joined by crc32_combine64), so visit may be
// called from several threads at once, for different blocks.
uint32_t crc_and_visit(const char* data, uint64_t size, const ZipArchive::BlockVisitor& visit) {
  constexpr uint64_t kBlock = 1 << 20;
  const auto blocks = static_cast<int64_t>((size + kBlock - 1) / kBlock);
  const int parts = static_cast<int>(std::min<int64_t>(blocks / 4, omp_get_max_threads()));
  auto run = [&](int64_t first, int64_t last) {  // blocks [first, last)
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (int64_t b = first; b < last; ++b) {
      const uint64_t at = static_cast<uint64_t>(b) * kBlock, n = std::min(kBlock, size - at);
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(data + at), n);
      if (visit) visit(data + at, at, n);
    }
    return crc;
  };
  if (parts <= 1) return static_cast<uint32_t>(run(0, blocks));
  std::vector<uLong> crcs(static_cast<size_t>(parts));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) crcs[static_cast<size_t>(p)] = run(blocks * p / parts, blocks * (p + 1) / parts);
  uLong crc = crcs[0];
  for (int p = 1; p < parts; ++p) {
    const uint64_t first = static_cast<uint64_t>(blocks * p / parts) * kBlock;
    const uint64_t last = std::min(size, static_cast<uint64_t>(blocks * (p + 1) / parts) * kBlock);
    crc = crc32_combine64(crc, crcs[static_cast<size_t>(p)], static_cast<z_off64_t>(last - first));
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

ZipBytes ZipArchive::read(const ZipEntry& e, const BlockVisitor& visit) const {
  const char* start = base_ + e.data_offset;
  if (!e.deflated) {
    const uint32_t crc = crc_and_visit(start, e.size, visit);
    VIT_CHECK(static_cast<uint32_t>(crc) == e.crc, "zip",
              "{}: entry '{}': CRC-32 mismatch (recorded {:08x}, computed {:08x}): the file is corrupt", name_,
              printable(e.name), e.crc, static_cast<uint32_t>(crc));
    return {start, e.size, owner_, mapped_};
  }
  const uint64_t budget = kInflateFloorBytes + kInflateRatio * size_;
  VIT_CHECK(e.size <= budget - std::min(budget, *inflated_), "zip",
            "{}: entry '{}': inflating {} more bytes would pass the {}-byte budget for this archive", name_,
            printable(e.name), e.size, budget);
  auto out = std::make_shared<std::vector<char>>(e.size + 1);  // one spare byte: inflating past the size shows
  z_stream z{};
  VIT_CHECK(inflateInit2(&z, -MAX_WBITS) == Z_OK, "zip", "{}: entry '{}': cannot start inflating", name_,
            printable(e.name));
  uint64_t in_done = 0, out_done = 0;
  int status = Z_OK;
  while (status == Z_OK) {
    const uint64_t in_left = e.compressed_size - in_done, out_left = out->size() - out_done;
    if (out_left == 0) break;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(start + in_done));
    z.avail_in = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    z.next_out = reinterpret_cast<Bytef*>(out->data() + out_done);
    z.avail_out = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
    const uInt in_before = z.avail_in, out_before = z.avail_out;
    status = inflate(&z, Z_NO_FLUSH);
    in_done += in_before - z.avail_in;
    out_done += out_before - z.avail_out;
    if (status == Z_BUF_ERROR && in_before == z.avail_in && out_before == z.avail_out) break;  // no progress
    if (status == Z_BUF_ERROR) status = Z_OK;
  }
  const std::string message = z.msg != nullptr ? z.msg : "bad data";
  inflateEnd(&z);
  VIT_CHECK(out_done <= e.size, "zip",
            "{}: entry '{}' inflates to more than the {} bytes it declares (a zip bomb, or a corrupt archive)", name_,
            printable(e.name), e.size);
  VIT_CHECK(status == Z_STREAM_END && out_done == e.size, "zip",
            "{}: entry '{}': the deflate stream is corrupt or truncated ({} of {} bytes inflated{})", name_,
            printable(e.name), out_done, e.size, status == Z_DATA_ERROR ? ": " + message : "");
  *inflated_ += e.size;
  out->resize(e.size);
  const uint32_t crc = crc_and_visit(out->data(), out->size(), visit);
  VIT_CHECK(static_cast<uint32_t>(crc) == e.crc, "zip",
            "{}: entry '{}': CRC-32 mismatch (recorded {:08x}, computed {:08x}): the file is corrupt", name_,
            printable(e.name), e.crc, static_cast<uint32_t>(crc));
  const char* data = out->data();
  return {data, e.size, std::static_pointer_cast<void>(out), false};
}

}  // namespace vit::io
