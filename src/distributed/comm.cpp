// MPI behind the watchdog (see comm.h).
#include "distributed/comm.h"

// The C API only (OpenMPI would otherwise pull in its removed C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <thread>

namespace vit::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Threads of one rank (the gradient reducer's) may call in turn, never at once: MPI runs at
// MPI_THREAD_SERIALIZED and this lock serialises the calls.
std::mutex g_mpi;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

// Set by a failed MPI call: the job is broken (Comm::broken).
bool g_failed = false;

// A failed MPI call mid-job: the job cannot go on (PeerLost); at start it is a plain error.
void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  g_failed = true;
  throw PeerLost(fmt::format("[mpi] {} failed: {}", what, mpi_error(code)));
}

}  // namespace

struct Comm::Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  bool done = false;
};

bool Comm::launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

namespace {

int from_env(std::initializer_list<const char*> names, int otherwise) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) {
      char* end = nullptr;
      const long v = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && v >= 0 && v < (1L << 30)) return static_cast<int>(v);
    }
  }
  return otherwise;
}

}  // namespace

int Comm::launched_ranks() { return from_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1); }
int Comm::launched_rank() { return from_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, 0); }

Comm& Comm::world() {
  static Comm comm;
  return comm;
}

Comm::Comm() {
  hosts_ = {""};
  pids_ = {static_cast<int64_t>(::getpid())};
  if (launched_by_mpirun()) init_mpi();
}

void Comm::init_mpi() {
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  mpi_ = true;
  VIT_CHECK(provided >= MPI_THREAD_SERIALIZED, "mpi",
            "this MPI library gives thread level {} (vit needs MPI_THREAD_SERIALIZED)", provided);
  // Errors come back as codes (and become vit errors naming the call) instead of aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Every rank's host and pid, so that a lost rank on this host can be named (comm.h).
  constexpr int kHost = 256;
  char host[kHost] = {};
  ::gethostname(host, kHost - 1);
  std::vector<char> hosts(static_cast<size_t>(kHost) * size_);
  check_mpi(MPI_Allgather(host, kHost, MPI_CHAR, hosts.data(), kHost, MPI_CHAR, MPI_COMM_WORLD), "MPI_Allgather");
  const int64_t pid = ::getpid();
  pids_.assign(static_cast<size_t>(size_), 0);
  check_mpi(MPI_Allgather(&pid, 1, MPI_INT64_T, pids_.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Allgather");
  hosts_.clear();
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(hosts.data() + static_cast<size_t>(r) * kHost);
}

std::string Comm::describe(int r) const {
  if (r < 0 || r >= size_) return fmt::format("rank {}", r);
  return fmt::format("rank {} (pid {} on {})", r, pids_[r], hosts_[r]);
}

void Comm::set_watchdog(double timeout_seconds, std::function<int()> signal_pending) {
  timeout_ = timeout_seconds;
  signal_pending_ = std::move(signal_pending);
}

void Comm::lose(const std::string& why) {
  broken_ = true;
  throw PeerLost(fmt::format("{} of {}: {}", describe(rank_), size_, why));
}

void Comm::wait_until(const std::function<bool()>& done, const char* what, bool patient) {
  const auto start = Clock::now();
  auto last_look = start;
  std::optional<Clock::time_point> signalled;
  for (int spins = 0;; ++spins) {
    if (done()) {
      longest_wait_ = std::max(longest_wait_, seconds_since(start));
      return;
    }
    if (!patient && signal_pending_ && !signalled && signal_pending_() != 0) signalled = Clock::now();
    if (seconds_since(last_look) > 0.05 || signalled) {
      last_look = Clock::now();
      // A rank on this host whose process is gone: named at once.
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || hosts_[r] != hosts_[rank_]) continue;
        if (::kill(static_cast<pid_t>(pids_[r]), 0) != 0 && errno == ESRCH) {
          lose(fmt::format("{} is gone (its process ended) during {}", describe(r), what));
        }
      }
    }
    const double grace = std::max(kSignalGraceSeconds, 2 * longest_wait_);
    if (signalled && seconds_since(*signalled) > grace) {
      lose(fmt::format(
          "stopped waiting for the other ranks in {}: a stop signal came and they did not join within {:.1f} s "
          "(mpirun sends SIGTERM to every rank when one dies: its message names the rank)",
          what, grace));
    }
    if (seconds_since(start) > timeout_) {
      lose(
          fmt::format("no answer from the other ranks for {:.0f} s in {} (--comm-timeout): a rank or its host "
                      "stopped, or the network between them",
                      timeout_, what));
    }
    if (spins < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A blocking collective: started as its non-blocking form (start(&request)), then waited for
// through the watchdog.
template <class Start>
void Comm::collective(const char* what, bool patient, Start start) {
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> lock(g_mpi);
    check_mpi(start(&request), what);
  }
  wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(g_mpi);
        int flag = 0;
        check_mpi(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what);
        return flag != 0;
      },
      what, patient);
}

void Comm::sum(double* data, int64_t n) {
  if (!distributed() || n == 0) return;
  collective("a sum over the ranks", false, [&](MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, request);
  });
}

double Comm::max(double value) {
  if (!distributed()) return value;
  collective("a maximum over the ranks", false, [&](MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, request);
  });
  return value;
}

void Comm::broadcast(int64_t& value, int root) {
  if (!distributed()) return;
  collective("a broadcast", false,
             [&](MPI_Request* request) { return MPI_Ibcast(&value, 1, MPI_INT64_T, root, MPI_COMM_WORLD, request); });
}

void Comm::broadcast(double& value, int root) {
  if (!distributed()) return;
  collective("a broadcast", false,
             [&](MPI_Request* request) { return MPI_Ibcast(&value, 1, MPI_DOUBLE, root, MPI_COMM_WORLD, request); });
}

void Comm::broadcast(std::string& bytes, int root) {
  if (!distributed()) return;
  auto size = static_cast<int64_t>(bytes.size());
  broadcast(size, root);
  VIT_CHECK(size < (int64_t{1} << 31), "mpi", "a broadcast of {} bytes is too large", size);
  bytes.resize(static_cast<size_t>(size));
  collective("a broadcast", false, [&](MPI_Request* request) {
    return MPI_Ibcast(bytes.data(), static_cast<int>(size), MPI_CHAR, root, MPI_COMM_WORLD, request);
  });
}

std::vector<std::string> Comm::all_gather(const std::string& bytes) {
  if (!distributed()) return {bytes};
  std::vector<int> sizes(static_cast<size_t>(size_));
  int mine = static_cast<int>(bytes.size());
  collective("a gather", false, [&](MPI_Request* request) {
    return MPI_Iallgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD, request);
  });
  std::vector<int> offsets(static_cast<size_t>(size_), 0);
  for (int r = 1; r < size_; ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  std::string all(static_cast<size_t>(offsets.back() + sizes.back()), '\0');
  collective("a gather", false, [&](MPI_Request* request) {
    return MPI_Iallgatherv(bytes.data(), mine, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                           MPI_COMM_WORLD, request);
  });
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

void Comm::barrier(bool patient) {
  if (!distributed()) return;
  collective("a barrier", patient, [&](MPI_Request* request) { return MPI_Ibarrier(MPI_COMM_WORLD, request); });
}

int Comm::start_sum(float* data, int64_t n) {
  auto* pending = new Pending;
  if (distributed() && n > 0) {
    std::lock_guard<std::mutex> lock(g_mpi);
    check_mpi(
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &pending->request),
        "MPI_Iallreduce");
  } else {
    pending->done = true;
  }
  std::lock_guard<std::mutex> lock(g_mpi);
  pending_.push_back(pending);
  return static_cast<int>(pending_.size()) - 1;
}

void Comm::progress() {
  if (!distributed()) return;
  std::lock_guard<std::mutex> lock(g_mpi);
  for (Pending* p : pending_) {
    if (p == nullptr || p->done) continue;
    int flag = 0;
    check_mpi(MPI_Test(&p->request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    p->done = flag != 0;
  }
}

void Comm::wait(int handle) {
  Pending* pending = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mpi);
    VIT_ASSERT(handle >= 0 && handle < static_cast<int>(pending_.size()) && pending_[handle] != nullptr);
    pending = pending_[handle];
  }
  wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(g_mpi);
        if (!pending->done) {
          int flag = 0;
          check_mpi(MPI_Test(&pending->request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
          pending->done = flag != 0;
        }
        return pending->done;
      },
      "the gradient sum");
  std::lock_guard<std::mutex> lock(g_mpi);
  delete pending;
  pending_[handle] = nullptr;
  while (!pending_.empty() && pending_.back() == nullptr) pending_.pop_back();
}

bool Comm::broken() const { return broken_ || g_failed; }

void Comm::finalize() {
  if (!mpi_ || broken() || finalized_) return;
  finalized_ = true;
  MPI_Finalize();
}

}  // namespace vit::distributed
