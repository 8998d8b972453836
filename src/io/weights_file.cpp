// .npz archives and the format sniffing of load_weights_file (see weights_file.h); torch.save zips
// are read by torch_zip.cpp.
#include "io/weights_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "io/npy.h"

namespace vit::io {

WeightsFile read_npz(const ZipArchive& zip) {
  WeightsFile file;
  file.path = zip.name();
  file.format = WeightsFormat::Npz;
  for (const ZipEntry& e : zip.entries()) {
    VIT_CHECK(e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0, "npz",
              "{}: entry '{}' is not a .npy array", zip.name(), e.name);
    const ZipBytes b = zip.read(e);
    file.tensors.emplace_back(
        e.name.substr(0, e.name.size() - 4),
        parse_npy(reinterpret_cast<const uint8_t*>(b.data), b.size, fmt::format("{}: {}", zip.name(), e.name)));
  }
  VIT_CHECK(!file.tensors.empty(), "npz", "{}: an empty archive (no arrays)", zip.name());
  return file;
}

std::string sniff_weights_format(const char* data, uint64_t size) {
  if (looks_like_zip(data, size)) return "zip";
  // A bare pickle stream (PROTO 2..5): torch.save's legacy format.
  if (size >= 2 && static_cast<unsigned char>(data[0]) == 0x80 && data[1] >= 2 && data[1] <= 5) return "pickle";
  // The legacy format's tar variant (PyTorch < 0.4): a tar archive with a "storages" member.
  if (size >= 262 && std::memcmp(data + 257, "ustar", 5) == 0) return "tar";
  return "safetensors";
}

WeightsFile load_weights_file(const std::string& path) {
  char head[262] = {};
  uint64_t got = 0;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      const ssize_t n = ::read(fd, head, sizeof head);
      got = n > 0 ? static_cast<uint64_t>(n) : 0;
      ::close(fd);
    }
  }
  const std::string kind = sniff_weights_format(head, got);
  if (kind == "pickle" || kind == "tar") {
    fail("pytorch",
         "{}: a PyTorch checkpoint in the legacy format (torch.save before PyTorch 1.6, or with "
         "_use_new_zipfile_serialization=False): not read (vit reads the zip format that PyTorch has written since "
         "1.6); re-save it once with PyTorch: torch.save(torch.load(f, weights_only=True), 'new.pth')",
         path);
  }
  if (kind != "zip") return load_safetensors(path);
  const ZipArchive zip = ZipArchive::open(path);
  const bool npz = !zip.entries().empty() && std::all_of(zip.entries().begin(), zip.entries().end(), [](const auto& e) {
    return e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".npy") == 0;
  });
  return npz ? read_npz(zip) : read_torch_zip(zip);
}

}  // namespace vit::io
