// The run folder's lock (see run_lock.h).
#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/check.h"

namespace vit::train {
namespace fs = std::filesystem;

namespace {

// The pid another run wrote into the lock file ("" while it has not written it yet).
std::string holder_pid(int fd) {
  // The holder writes its pid right after locking: give it a moment.
  for (int attempt = 0; attempt < 50; ++attempt) {
    char buffer[32] = {};
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
    std::string text(buffer, n > 0 ? static_cast<size_t>(n) : 0);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return "";
}

}  // namespace

RunLock RunLock::acquire(const std::string& dir) {
  RunLock lock;
  lock.dir_ = dir;
  lock.path_ = (fs::path(dir) / ".lock").string();
  // The lock file is removed when a run ends, so the file locked must still be the one at path_
  // (another run may have removed it between our open and our flock): otherwise try again.
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    lock.created_.clear();
    fs::path p = fs::path(dir).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();  // "runs/x/"
    for (; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) lock.created_.push_back(p.string());
    fs::create_directories(dir, ec);
    VIT_CHECK(!ec, "train", "--out {}: cannot create the folder ({})", dir, ec.message());
    const int fd = ::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && attempt < 10) continue;  // the folder was just removed by a run ending
    VIT_CHECK(fd >= 0, "train", "{}: cannot create the run's lock file ({})", lock.path_, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      const std::string pid = e == EWOULDBLOCK ? holder_pid(fd) : "";
      ::close(fd);
      lock.created_.clear();  // the folder is the other run's
      VIT_CHECK(e != EWOULDBLOCK, "train", "{} is in use by another vit train{}; wait for it or choose another --out",
                dir, pid.empty() ? std::string() : " (pid " + pid + ")");
      if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS) {  // a file system without locks (some network mounts)
        std::fprintf(stderr,
                     "warning: %s: this file system cannot lock the run folder (%s); make sure no other vit "
                     "train uses it\n",
                     dir.c_str(), std::strerror(e));
        return lock;
      }
      fail("train", "{}: cannot lock the run folder ({})", lock.path_, std::strerror(e));
    }
    struct stat locked {
    }, at_path{};
    if (::fstat(fd, &locked) == 0 && ::stat(lock.path_.c_str(), &at_path) == 0 && locked.st_ino == at_path.st_ino &&
        locked.st_dev == at_path.st_dev) {
      lock.fd_ = fd;
      break;
    }
    ::close(fd);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock.fd_, 0) != 0 ||
      ::pwrite(lock.fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int e = errno;
    lock.release();
    fail("train", "{}: cannot write the run's lock file ({})", lock.path_, std::strerror(e));
  }
  return lock;
}

void RunLock::release() {
  if (fd_ < 0) return;
  // Removed while still locked: a run that opens it meanwhile sees a different file at the path
  // once it gets the lock, and tries again (acquire).
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
  for (const std::string& created : created_) {
    std::error_code ec;
    if (!fs::remove(created, ec)) break;  // only if empty: a run that stopped before writing anything
  }
  created_.clear();
}

RunLock::~RunLock() { release(); }

RunLock::RunLock(RunLock&& other) noexcept
    : fd_(other.fd_), dir_(std::move(other.dir_)), path_(std::move(other.path_)), created_(std::move(other.created_)) {
  other.fd_ = -1;
}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    dir_ = std::move(other.dir_);
    path_ = std::move(other.path_);
    created_ = std::move(other.created_);
    other.fd_ = -1;
  }
  return *this;
}

}  // namespace vit::train
