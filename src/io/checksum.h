// XXH64, the 64-bit xxHash of Yann Collet (github.com/Cyan4973/xxHash, doc/xxhash_spec.md),
// written from its specification: four 64-bit lanes over 32-byte stripes, then a merge and an
// avalanche. Fast (several GB/s on one core) and portable (no intrinsics), it is the checksum of
// vit checkpoints (see io/safetensors.h). Not cryptographic: it detects edits and corruption,
// not a forger who recomputes it. Results equal the reference implementation's (python3-xxhash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vit::io {

// Incremental XXH64: update() any number of times with consecutive pieces, then digest(); the
// result equals xxh64() of the concatenation.
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4];
  uint64_t total_ = 0;
  unsigned char buffer_[32];
  size_t buffered_ = 0;
  uint64_t seed_;
};

uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);

// "xxh64:" and 16 lower-case hex digits.
std::string checksum_str(uint64_t value);

}  // namespace vit::io
