// SIGINT / SIGTERM while training: the handler only records the signal; the loop saves a
// checkpoint after the current step and stops. SA_RESETHAND: a second Ctrl-C kills at once
// (safe, since checkpoints are replaced atomically). The previous handlers come back when the
// object is destroyed.
#pragma once

#include <signal.h>

namespace vit::train {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int pending() const;           // the signal received (SIGINT or SIGTERM), or 0
  const char* describe() const;  // "Ctrl-C (SIGINT)" or "SIGTERM"

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace vit::train
