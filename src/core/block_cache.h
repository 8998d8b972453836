// A cache of large, 64-byte aligned memory blocks for tensor storage. A training step allocates
// the same activation and gradient sizes every step; without the cache each large block came
// from glibc freshly (mmap, or a trimmed heap): page faults, zeroed pages and malloc_consolidate
// were ~8% of the small-model step. Blocks of at least kMinCachedBytes go back into a free list
// keyed by their (page-rounded) size and are handed out again for the same size; the list holds
// at most kMaxCachedBytes (a block that does not fit is freed). Thread-safe (one mutex: large
// blocks only, so a few dozen locks a step). Under AddressSanitizer every block is freed at once,
// so use-after-free is still caught.
#pragma once

#include <cstddef>

namespace vit {

inline constexpr size_t kMinCachedBytes = size_t(64) << 10;
inline constexpr size_t kMaxCachedBytes = size_t(1) << 30;

// At least nbytes (> 0) of 64-byte aligned memory, uninitialised; null when out of memory.
void* block_allocate(size_t nbytes);
// Gives back a block from block_allocate(nbytes) (the same nbytes).
void block_free(void* p, size_t nbytes);
// Frees every cached block (tests; a program that wants its memory back).
void block_cache_clear();
// Bytes held in the free list now.
size_t block_cache_bytes();

}  // namespace vit
