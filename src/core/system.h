// What the machine has: physical memory (the smaller of RAM and a cgroup limit), so requests
// that cannot fit are refused with a message instead of dying in the allocator or the OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace vit {

// Bytes of memory this process may use at most: physical RAM, or the cgroup v2/v1 memory limit
// when one is set and smaller. Overridable with the environment variable VIT_MEMORY_LIMIT
// (bytes; for tests and for sharing a machine).
uint64_t memory_limit_bytes();

// "12.3 GiB", "456.7 MiB", "789 KiB": sizes for messages.
std::string bytes_str(double bytes);

// Throws "[memory] {what} needs about X but this machine has Y{advice}" when bytes exceeds
// memory_limit_bytes().
void check_fits_in_memory(double bytes, const std::string& what, const std::string& advice);

// Lets the allocator keep and reuse the memory of freed tensors instead of handing it back to the
// kernel and faulting fresh zeroed pages in on the next step: blocks up to 64 MiB come from the
// heap (not their own mmap) and the heap is trimmed only past 512 MiB free at its top. A training
// step frees and re-allocates the same activations every time; on the patch-4 digits model the
// page faults were ~15% of a step. The `vit` command calls it once at start; library users
// opt in (it changes glibc's malloc settings for the whole process). No-op elsewhere.
void keep_freed_memory();

}  // namespace vit
