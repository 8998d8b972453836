// The run folder's lock: one `vit train` at a time in a --out folder. An advisory flock() on
// DIR/.lock, held for the whole run (resumes included) and holding the owner's pid, so a second
// run refuses at once naming it. flock locks die with their process, so a lock file left by a
// SIGKILLed run never blocks the next one. Released (and the lock file removed) on every exit
// path by the destructor.
#pragma once

#include <string>
#include <vector>

namespace vit::train {

class RunLock {
 public:
  RunLock() = default;
  // Creates dir if needed and locks it; throws "[train] DIR is in use by another vit train
  // (pid N); wait for it or choose another --out" when another process holds the lock. On a file
  // system that has no locks it warns and returns an unheld lock.
  static RunLock acquire(const std::string& dir);
  ~RunLock();
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  bool held() const { return fd_ >= 0; }
  // Unlocks now (the destructor does it otherwise). Folders this lock created are removed again
  // if the run left nothing in them (a run refused before writing anything leaves no trace).
  void release();

 private:
  int fd_ = -1;
  std::string dir_, path_;
  std::vector<std::string> created_;  // folders this lock created, deepest first
};

}  // namespace vit::train
