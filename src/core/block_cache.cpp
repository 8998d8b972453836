// The large-block cache of tensor storage (see block_cache.h).
#include "core/block_cache.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace vit {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kPage = 4096;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif
#else
constexpr bool kCaching = true;
#endif

// The bytes really allocated for a request: 64-byte multiples, whole pages for cached sizes.
size_t rounded(size_t nbytes) {
  const size_t r = std::max<size_t>((nbytes + kAlign - 1) / kAlign * kAlign, kAlign);
  return r >= kMinCachedBytes ? (r + kPage - 1) / kPage * kPage : r;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free;  // by rounded size
  size_t bytes = 0;
};

// Never destroyed: storage freed by static destructors after main may still come back here.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

}  // namespace

void* block_allocate(size_t nbytes) {
  const size_t size = rounded(nbytes);
  if (kCaching && size >= kMinCachedBytes) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free.find(size);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= size;
      return p;
    }
  }
  return std::aligned_alloc(kAlign, size);
}

void block_free(void* p, size_t nbytes) {
  if (!p) return;
  const size_t size = rounded(nbytes);
  if (kCaching && size >= kMinCachedBytes) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.bytes + size <= kMaxCachedBytes) {
      c.free[size].push_back(p);
      c.bytes += size;
      return;
    }
  }
  std::free(p);
}

void block_cache_clear() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, blocks] : c.free) {
    for (void* p : blocks) std::free(p);
  }
  c.free.clear();
  c.bytes = 0;
}

size_t block_cache_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

}  // namespace vit
