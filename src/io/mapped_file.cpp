// open_regular_file, map_file (see mapped_file.h).
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace vit::io {
namespace {

const char* file_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

int open_regular_file(const std::string& path, const char* op) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(op, "{}: cannot open ({})", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(op, "{}: not a regular file ({})", path, file_type(st.st_mode));
  // O_NONBLOCK: should the path become a FIFO after the stat, opening it still returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(op, "{}: cannot open ({})", path, std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(op, "{}: not a regular file ({})", path, file_type(st.st_mode));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

MappedFile map_file(const std::string& path, const char* op) {
  const int fd = open_regular_file(path, op);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(op, "{}: cannot open ({})", path, std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(op, "{}: file is empty", path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(op, "{}: mmap failed ({})", path, std::strerror(errno));
  return {std::shared_ptr<void>(map, [size](void* p) { ::munmap(p, size); }), static_cast<const char*>(map), size};
}

}  // namespace vit::io
