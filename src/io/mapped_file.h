// Opening the files vit reads, and a whole file as a private (copy-on-write) memory mapping, for
// the readers that borrow tensors from it (safetensors, torch.save zips): tensors may be modified
// in place (fine-tuning a loaded checkpoint) without touching the file, and untouched pages stay
// shared with the page cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace vit::io {

// Opens path for reading (the caller closes the descriptor). Anything but a regular file (a
// FIFO, a directory, a device, a socket) is refused before it is opened: opening a FIFO nobody
// writes to would block forever. The one door through which vit opens a model, weights or .npy
// file. Throws "[op] PATH: cannot open (reason)" or "[op] PATH: not a regular file (a FIFO)".
int open_regular_file(const std::string& path, const char* op);

struct MappedFile {
  std::shared_ptr<void> owner;  // unmaps when the last holder goes
  const char* data = nullptr;
  uint64_t size = 0;
};

// Throws open_regular_file's errors, "[op] PATH: file is empty" or "mmap failed (...)".
MappedFile map_file(const std::string& path, const char* op);

}  // namespace vit::io
