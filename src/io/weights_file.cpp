// .npz archives and the format sniffing of load_weights_file (see weights_file.h); torch.save zips
// are read by torch_zip.cpp.
#include "io/weights_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/printable.h"
#include "io/mapped_file.h"
#include "io/npy.h"
#include "io/onnx.h"

namespace vit::io {

WeightsFile read_npz(const ZipArchive& zip) {
  WeightsFile file;
  file.path = zip.name();
  file.format = WeightsFormat::Npz;
  for (const ZipEntry& e : zip.entries()) {
    VIT_CHECK(e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0, "npz",
              "{}: entry '{}' is not a .npy array (a NumPy .npz holds only those)", zip.name(), printable(e.name));
    const ZipBytes b = zip.read(e);
    file.tensors.emplace_back(e.name.substr(0, e.name.size() - 4),
                              parse_npy(reinterpret_cast<const uint8_t*>(b.data), b.size,
                                        fmt::format("{}: {}", zip.name(), printable(e.name))));
  }
  VIT_CHECK(!file.tensors.empty(), "npz", "{}: an empty archive (no arrays)", zip.name());
  return file;
}

namespace {

// What vit reads, for the message about a file that is none of it.
constexpr const char* kWhatVitReads =
    "vit reads safetensors files (its own checkpoints, timm, torchvision, Hugging Face), PyTorch torch.save files "
    "(.pth, .pt, .bin) and NumPy .npz archives (JAX)";

// The first bytes of a file, and its size.
struct Head {
  char bytes[262] = {};
  uint64_t got = 0, size = 0;
};

Head read_head(const std::string& path) {
  Head h;
  const int fd = open_regular_file(path, "file");
  struct stat st {};
  if (::fstat(fd, &st) == 0) h.size = static_cast<uint64_t>(st.st_size);
  const ssize_t n = ::read(fd, h.bytes, sizeof h.bytes);
  ::close(fd);
  h.got = n > 0 ? static_cast<uint64_t>(n) : 0;
  return h;
}

// A safetensors file starts with its header's length, then the JSON header's '{'.
bool looks_like_safetensors(const Head& h) {
  if (h.got < 9) return false;
  uint64_t header_len = 0;
  std::memcpy(&header_len, h.bytes, 8);
  const char c = h.bytes[8];
  return c == '{' || ((c == ' ' || c == '\n' || c == '\r' || c == '\t') && header_len <= h.size - 8);
}

bool looks_like_onnx(const Head& h, const std::string& path) {
  const bool named = path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
  return named || io::looks_like_onnx(reinterpret_cast<const unsigned char*>(h.bytes), h.got);
}

// Where a zip archive starts when something was written before it (its end record, in the last
// 64 KiB, says where its directory ends); 0 when there is none.
uint64_t zip_after_prefix(const std::string& path) {
  const MappedFile f = map_file(path, "file");
  const uint64_t from = f.size > 65557 ? f.size - 65557 : 0;
  for (uint64_t at = f.size >= 22 ? f.size - 22 : 0; at + 22 <= f.size && at >= from; --at) {
    if (std::memcmp(f.data + at, "PK\x05\x06", 4) == 0) {
      uint32_t cd_size = 0, cd_offset = 0;
      std::memcpy(&cd_size, f.data + at + 12, 4);
      std::memcpy(&cd_offset, f.data + at + 16, 4);
      const uint64_t end = static_cast<uint64_t>(cd_size) + cd_offset;
      return end < at ? at - end : 1;
    }
    if (at == 0) break;
  }
  return 0;
}

// The file is none of the formats: say what it is, when that can be told, and what vit reads.
[[noreturn]] void refuse_unknown(const Head& h, const std::string& path) {
  if (h.size == 0) fail("file", "{}: the file is empty", path);
  if (h.got < 9) fail("file", "{}: {} bytes, too short to be any file vit reads ({})", path, h.size, kWhatVitReads);
  std::string what;
  if (looks_like_onnx(h, path)) {
    what =
        "it looks like an ONNX model (a protobuf), which vit reads as a model (vit predict --checkpoint "
        "FILE.onnx), not as a weights file";
  } else if (const uint64_t prefix = zip_after_prefix(path); prefix > 0) {
    what = fmt::format(
        "it holds a zip archive after {} bytes of something else; torch.save and NumPy write the archive from the "
        "file's first byte",
        prefix);
  } else if (const std::string known = known_format(h.bytes, h.got); !known.empty()) {
    what = "it is " + known;
  } else {
    what = "its first bytes are those of none of them";
  }
  fail("file", "{}: not a file vit reads ({}); {}", path, what, kWhatVitReads);
}

bool is_npy_name(const std::string& name) { return name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0; }

// A torch.save archive holds <archive>/data.pkl; a NumPy .npz, .npy arrays.
WeightsFile read_zip(const std::string& path) {
  const ZipArchive zip = ZipArchive::open(path);
  const auto& entries = zip.entries();
  const bool torch = std::any_of(entries.begin(), entries.end(), [](const ZipEntry& e) {
    const size_t slash = e.name.find('/');
    return slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0;
  });
  if (torch) return read_torch_zip(zip);
  if (std::any_of(entries.begin(), entries.end(), [](const ZipEntry& e) { return is_npy_name(e.name); })) {
    return read_npz(zip);
  }
  std::vector<std::string> names;
  for (size_t k = 0; k < entries.size() && k <= kListShown; ++k) names.push_back(entries[k].name);
  fail("zip",
       "{}: a zip archive that is neither a torch.save file (no <archive>/data.pkl entry) nor a NumPy .npz (no .npy "
       "arrays); it holds {}",
       path, entries.empty() ? std::string("nothing") : printable_list(names));
}

std::string sniff_weights_format(const char* data, uint64_t size) {
  if (looks_like_zip(data, size)) return "zip";
  // A bare pickle stream (PROTO 2..5): torch.save's legacy format.
  if (size >= 2 && static_cast<unsigned char>(data[0]) == 0x80 && data[1] >= 2 && data[1] <= 5) return "pickle";
  // The legacy format's tar variant (PyTorch < 0.4): a tar archive with a "storages" member.
  if (size >= 262 && std::memcmp(data + 257, "ustar", 5) == 0) return "tar";
  return "safetensors";
}

}  // namespace

WeightsFile load_weights_file(const std::string& path) {
  const Head head = read_head(path);
  const std::string kind = sniff_weights_format(head.bytes, head.got);
  if (kind == "pickle" || kind == "tar") {
    fail("pytorch",
         "{}: a PyTorch checkpoint in the legacy format (torch.save before PyTorch 1.6, or with "
         "_use_new_zipfile_serialization=False): not read (vit reads the zip format that PyTorch has written since "
         "1.6); re-save it once with PyTorch: torch.save(torch.load(f, weights_only=True), 'new.pth')",
         path);
  }
  if (kind == "zip") return read_zip(path);
  if (!looks_like_safetensors(head)) refuse_unknown(head, path);
  return load_safetensors(path);
}

}  // namespace vit::io
