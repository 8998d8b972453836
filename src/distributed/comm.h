// The processes of a data-parallel job and what they say to each other: MPI (Debian's OpenMPI)
// when `vit` is started by mpirun, a single process with no MPI at all otherwise (exactly as
// without this layer). Only this layer includes <mpi.h>.
//
// Every wait goes through a watchdog instead of a blocking MPI call, so a job that loses a rank
// stops in bounded time with a message naming it, rather than hanging:
//  - a rank on this host whose process is gone is named at once (ranks exchange host and pid at
//    start);
//  - after SIGINT/SIGTERM (mpirun sends SIGTERM to every rank when one dies, and ~1 s later
//    SIGKILL), a collective the others do not join within the grace is given up: twice the
//    longest any collective of this job has waited so far, at least kSignalGraceSeconds (so a
//    rank a step behind is not taken for lost when steps are long);
//  - otherwise no progress for the timeout (--comm-timeout, default 120 s) gives up.
// Giving up throws PeerLost and marks the job broken: MPI is then not finalised (that would wait
// for the lost rank too), mpirun ends the job. An MPI call that fails mid-job (a connection to a
// dead rank, say) is a PeerLost too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"

namespace vit::distributed {

class PeerLost : public Error {
 public:
  using Error::Error;
};

inline constexpr double kSignalGraceSeconds = 0.5;
inline constexpr double kDefaultTimeoutSeconds = 120.0;

class Comm {
 public:
  // This process's job. MPI is initialised on the first call when the environment says mpirun
  // (OpenMPI, or a PMI/PMIx launcher) started the process; otherwise rank 0 of 1.
  static Comm& world();
  // Whether a launcher's environment is present (without initialising anything).
  static bool launched_by_mpirun();
  // The job's size and this process's rank as the launcher's environment gives them (1 and 0
  // without a launcher), without initialising MPI.
  static int launched_ranks();
  static int launched_rank();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }
  // "rank 1 (pid 4725 on node3)".
  std::string describe(int rank) const;
  // The watchdog's settings: `timeout` seconds without progress; `signal_pending` tells whether
  // a stop signal has arrived (0: none).
  void set_watchdog(double timeout_seconds, std::function<int()> signal_pending);

  // ---- blocking collectives: every rank calls the same ones in the same order ----
  void sum(double* data, int64_t n);
  void sum(std::vector<double>& values) { sum(values.data(), static_cast<int64_t>(values.size())); }
  double max(double value);
  void broadcast(std::string& bytes, int root = 0);
  void broadcast(int64_t& value, int root = 0);
  void broadcast(double& value, int root = 0);
  std::vector<std::string> all_gather(const std::string& bytes);
  // patient: the signal rule is off (the ranks wait for rank 0 to save after an agreed stop;
  // the lost-process check and the timeout still hold).
  void barrier(bool patient = false);

  // ---- non-blocking in-place sums of floats (gradient buckets) ----
  // Starts summing data[0..n) over the ranks; returns a handle for wait(). Callers keep the
  // buffer alive and untouched until wait() returns.
  int start_sum(float* data, int64_t n);
  // Lets outstanding sums advance (OpenMPI progresses non-blocking collectives inside MPI calls).
  void progress();
  void wait(int handle);

  // At a clean exit of every rank: MPI_Finalize (nothing when not distributed or broken).
  void finalize();
  bool broken() const;

  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

 private:
  Comm();
  void init_mpi();
  // Polls `done` (which tests the request) until it reports completion, through the watchdog.
  void wait_until(const std::function<bool()>& done, const char* what, bool patient = false);
  template <class Start>
  void collective(const char* what, bool patient, Start start);
  [[noreturn]] void lose(const std::string& why);

  int rank_ = 0, size_ = 1;
  bool mpi_ = false, broken_ = false, finalized_ = false;
  double timeout_ = kDefaultTimeoutSeconds;
  double longest_wait_ = 0.0;  // the longest a collective has waited so far (the signal grace)
  std::function<int()> signal_pending_;
  std::vector<std::string> hosts_;
  std::vector<int64_t> pids_;
  struct Pending;
  std::vector<Pending*> pending_;  // started sums by handle (owned; freed by wait)
};

}  // namespace vit::distributed
