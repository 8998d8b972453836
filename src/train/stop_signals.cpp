// Stop signals (see stop_signals.h).
#include "train/stop_signals.h"

#include <csignal>

namespace vit::train {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::pending() const { return g_stop_signal; }

const char* StopSignals::describe() const { return pending() == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM"; }

}  // namespace vit::train
