// XXH64 (see checksum.h), following xxHash's specification step by step.
#include "io/checksum.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace vit::io {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads (the format is defined on little-endian words; memcpy keeps them aligned-safe).
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint64_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t merge_round(uint64_t acc, uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kPrime1 + kPrime4;
}

// Consumes whole 32-byte stripes from p (size rounded down); returns the bytes consumed.
size_t consume_stripes(uint64_t lanes[4], const unsigned char* p, size_t size) {
  uint64_t v1 = lanes[0], v2 = lanes[1], v3 = lanes[2], v4 = lanes[3];
  const size_t whole = size - size % 32;
  for (size_t i = 0; i < whole; i += 32) {
    v1 = round(v1, read64(p + i));
    v2 = round(v2, read64(p + i + 8));
    v3 = round(v3, read64(p + i + 16));
    v4 = round(v4, read64(p + i + 24));
  }
  lanes[0] = v1, lanes[1] = v2, lanes[2] = v3, lanes[3] = v4;
  return whole;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : buffer_{}, seed_(seed) {
  lanes_[0] = seed + kPrime1 + kPrime2;
  lanes_[1] = seed + kPrime2;
  lanes_[2] = seed;
  lanes_[3] = seed - kPrime1;
}

void Xxh64::update(const void* data, size_t size) {
  auto p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (buffered_ > 0) {  // complete the pending stripe first
    const size_t take = std::min(size, 32 - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < 32) return;
    consume_stripes(lanes_, buffer_, 32);
    buffered_ = 0;
  }
  const size_t used = consume_stripes(lanes_, p, size);
  buffered_ = size - used;
  if (buffered_ > 0) std::memcpy(buffer_, p + used, buffered_);
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) h = merge_round(h, lane);
  } else {
    h = seed_ + kPrime5;
  }
  h += total_;
  // The last 0..31 bytes: 8 at a time, then 4, then one by one.
  const unsigned char* p = buffer_;
  size_t left = buffered_;
  for (; left >= 8; p += 8, left -= 8) h = rotl(h ^ round(0, read64(p)), 27) * kPrime1 + kPrime4;
  if (left >= 4) {
    h = rotl(h ^ (read32(p) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) h = rotl(h ^ (*p * kPrime5), 11) * kPrime1;
  // Avalanche.
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t size, uint64_t seed) {
  Xxh64 state(seed);
  state.update(data, size);
  return state.digest();
}

std::string checksum_str(uint64_t value) { return fmt::format("xxh64:{:016x}", value); }

}  // namespace vit::io
