// check_output and AtomicFile (see output_file.h).
#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"

namespace vit {

namespace {

// The folder a path lies in ("." for a bare name).
std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void fsync_folder(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void check_output(const char* op, const OutputFile& out, const std::vector<InputFile>& inputs, bool overwrite) {
  const std::string& path = out.path;
  VIT_CHECK(!path.empty(), op, "{} is empty: give {} to write", out.flag, out.what);
  struct stat link_st {};
  if (::lstat(path.c_str(), &link_st) != 0) {
    const int e = errno;
    VIT_CHECK(e == ENOENT, op, "{} {}: cannot write there ({})", out.flag, path, std::strerror(e));
    // A new file: its folder must exist and take it.
    const std::string folder = folder_of(path);
    struct stat dir_st {};
    VIT_CHECK(::stat(folder.c_str(), &dir_st) == 0, op, "{} {}: the folder {} does not exist", out.flag, path, folder);
    VIT_CHECK(S_ISDIR(dir_st.st_mode), op, "{} {}: {} is not a folder", out.flag, path, folder);
    VIT_CHECK(::access(folder.c_str(), W_OK | X_OK) == 0, op, "{} {}: cannot write in the folder {} ({})", out.flag,
              path, folder, std::strerror(errno));
    return;
  }
  struct stat st {};
  const bool resolves = ::stat(path.c_str(), &st) == 0;  // false: a dangling symlink
  VIT_CHECK(!resolves || !S_ISDIR(st.st_mode), op, "{} {} is a directory: give {} to write", out.flag, path, out.what);
  if (resolves) {
    for (const InputFile& in : inputs) {
      struct stat in_st {};
      if (in.path.empty() || ::stat(in.path.c_str(), &in_st) != 0) continue;
      if (in_st.st_dev != st.st_dev || in_st.st_ino != st.st_ino) continue;
      if (in.path == path) fail(op, "{} {} is {} itself: write {} to another path", out.flag, path, in.what, out.what);
      fail(op, "{} {} is {} itself (the same file as {}, through a link): write {} to another path", out.flag, path,
           in.what, in.path, out.what);
    }
    VIT_CHECK(S_ISREG(st.st_mode), op, "{} {} exists and is not a regular file: give {} to write", out.flag, path,
              out.what);
  }
  VIT_CHECK(overwrite, op, "{} {} exists ({} replaces it)", out.flag, path, out.overwrite_flag);
  const std::string folder = folder_of(path);
  VIT_CHECK(::access(folder.c_str(), W_OK | X_OK) == 0, op, "{} {}: cannot write in the folder {} ({})", out.flag, path,
            folder, std::strerror(errno));
}

std::string temp_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
}

AtomicFile::AtomicFile(const char* op, std::string path, Existing existing)
    : op_(op), path_(std::move(path)), existing_(existing) {
  VIT_CHECK(!path_.empty(), op_, "cannot write a file with an empty name");
  struct stat st {};
  VIT_CHECK(::stat(path_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), op_, "{}: is a directory", path_);
  tmp_ = temp_path(path_);
  // A name near the file system's limit leaves no room for the suffix: a short hidden one then.
  if (std::filesystem::path(tmp_).filename().string().size() > 240) {
    const std::string unique = temp_path("");
    tmp_ = folder_of(path_) + "/.vit" + unique;
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(op_, "{}: cannot write ({})", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0 && first_errno_ == 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      first_errno_ = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  VIT_ASSERT(!committed_ && fd_ >= 0);
  if (first_errno_ == 0 && ::fsync(fd_) != 0) first_errno_ = errno;
  if (::close(fd_) != 0 && first_errno_ == 0) first_errno_ = errno;
  fd_ = -1;
  if (first_errno_ != 0) fail(op_, "{}: write failed ({})", path_, std::strerror(first_errno_));
  if (existing_ == Existing::Refuse) {
    // link() fails with EEXIST if anything appeared at the path meanwhile: no window.
    if (::link(tmp_.c_str(), path_.c_str()) == 0) {
      ::unlink(tmp_.c_str());
      committed_ = true;
      fsync_folder(path_);
      return;
    }
    const int e = errno;
    VIT_CHECK(e != EEXIST, op_, "{}: exists (written meanwhile by someone else; nothing replaced)", path_);
    // File systems without hard links: check, then rename.
    struct stat st {};
    VIT_CHECK(::lstat(path_.c_str(), &st) != 0, op_, "{}: exists (written meanwhile by someone else; nothing replaced)",
              path_);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    fail(op_, "{}: cannot write ({})", path_, std::strerror(errno));
  }
  committed_ = true;
  fsync_folder(path_);
}

void write_file_atomically(const char* op, const std::string& path, const void* data, size_t size, Existing existing) {
  AtomicFile file(op, path, existing);
  file.write(data, size);
  file.commit();
}

}  // namespace vit
