// Machine limits (see system.h).
#include "core/system.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "core/check.h"

namespace vit {
namespace {

uint64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text == "max") return UINT64_MAX;
  try {
    return std::stoull(text);
  } catch (...) {
    return UINT64_MAX;
  }
}

}  // namespace

uint64_t memory_limit_bytes() {
  if (const char* env = std::getenv("VIT_MEMORY_LIMIT"); env && *env) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(env, &end, 10);
    VIT_CHECK(env[0] >= '0' && env[0] <= '9' && end && *end == '\0' && errno == 0 && v > 0, "memory",
              "VIT_MEMORY_LIMIT='{}' is not a positive number of bytes (e.g. VIT_MEMORY_LIMIT=8000000000)", env);
    return v;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  uint64_t limit = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  limit = std::min(limit, read_limit("/sys/fs/cgroup/memory.max"));                    // cgroup v2
  limit = std::min(limit, read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));  // cgroup v1
  return limit;
}

std::string bytes_str(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.0f} KiB", bytes / 1024.0);
}

void check_fits_in_memory(double bytes, const std::string& what, const std::string& advice) {
  const auto limit = static_cast<double>(memory_limit_bytes());
  VIT_CHECK(bytes <= limit, "memory", "{} needs about {} but this machine has {}{}", what, bytes_str(bytes),
            bytes_str(limit), advice);
}

void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

}  // namespace vit
