// A whole file as a private (copy-on-write) memory mapping, for the readers that borrow tensors
// from it (safetensors, torch.save zips): tensors may be modified in place (fine-tuning a loaded
// checkpoint) without touching the file, and untouched pages stay shared with the page cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace vit::io {

struct MappedFile {
  std::shared_ptr<void> owner;  // unmaps when the last holder goes
  const char* data = nullptr;
  uint64_t size = 0;
};

// Throws "[op] PATH: cannot open (...)", "not a regular file", "file is empty" or "mmap failed (...)".
MappedFile map_file(const std::string& path, const char* op);

}  // namespace vit::io
