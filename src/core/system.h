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

}  // namespace vit
