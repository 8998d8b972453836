// distributed::Comm in one process, as every run that mpirun did not start sees it: the launcher's
// environment read without initialising MPI (malformed values ignored), and a job of one rank whose
// collectives leave their data as it is (exactly as without this layer). Across processes it is
// checked end to end by tests/mpi (mpirun -np 2 vit train).
#include "distributed/comm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace vit::distributed {
namespace {

constexpr const char* kLauncherVariables[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                              "PMI_SIZE"};

// Sets (or unsets, nullopt) one environment variable for a test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool under_a_launcher() {
  for (const char* name : kLauncherVariables) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

TEST(Comm, LauncherEnvironmentIsReadWithoutMpi) {
  if (under_a_launcher()) GTEST_SKIP() << "this test process was started by a launcher";
  EXPECT_FALSE(Comm::launched_by_mpirun());
  EXPECT_EQ(Comm::launched_ranks(), 1);
  EXPECT_EQ(Comm::launched_rank(), 0);
  {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4");
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", "3");
    EXPECT_TRUE(Comm::launched_by_mpirun());
    EXPECT_EQ(Comm::launched_ranks(), 4);
    EXPECT_EQ(Comm::launched_rank(), 3);
  }
  {
    ScopedEnv size("PMI_SIZE", "2");
    ScopedEnv rank("PMIX_RANK", "1");
    EXPECT_TRUE(Comm::launched_by_mpirun());
    EXPECT_EQ(Comm::launched_ranks(), 2);
    EXPECT_EQ(Comm::launched_rank(), 1);
  }
  for (const char* malformed : {"", "4x", "-1", "99999999999"}) {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", malformed);
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", malformed);
    EXPECT_EQ(Comm::launched_ranks(), 1) << "'" << malformed << "'";
    EXPECT_EQ(Comm::launched_rank(), 0) << "'" << malformed << "'";
  }
  EXPECT_FALSE(Comm::launched_by_mpirun());
}

TEST(Comm, OneProcessIsAJobOfOneRank) {
  if (under_a_launcher()) GTEST_SKIP() << "this test process was started by a launcher";
  Comm& comm = Comm::world();
  EXPECT_EQ(&comm, &Comm::world());
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_FALSE(comm.distributed());
  EXPECT_FALSE(comm.broken());
  EXPECT_EQ(comm.describe(0), "rank 0 (pid " + std::to_string(::getpid()) + " on )");
  EXPECT_EQ(comm.describe(5), "rank 5");

  std::vector<double> values = {1.5, -2.0, 3.25};
  comm.sum(values);
  EXPECT_EQ(values, (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_EQ(comm.max(-7.5), -7.5);
  int64_t count = 42;
  double seconds = 0.25;
  std::string bytes = "state";
  comm.broadcast(count);
  comm.broadcast(seconds);
  comm.broadcast(bytes);
  EXPECT_EQ(count, 42);
  EXPECT_EQ(seconds, 0.25);
  EXPECT_EQ(bytes, "state");
  EXPECT_EQ(comm.all_gather("mine"), std::vector<std::string>{"mine"});
  comm.barrier();
  comm.barrier(/*patient=*/true);
}

TEST(Comm, GradientSumsAreHandlesThatCompleteAtOnce) {
  if (under_a_launcher()) GTEST_SKIP() << "this test process was started by a launcher";
  Comm& comm = Comm::world();
  std::vector<float> a = {1.0f, 2.0f}, b = {3.0f};
  const int first = comm.start_sum(a.data(), static_cast<int64_t>(a.size()));
  const int second = comm.start_sum(b.data(), static_cast<int64_t>(b.size()));
  const int empty = comm.start_sum(nullptr, 0);
  EXPECT_NE(first, second);
  EXPECT_NE(second, empty);
  comm.progress();
  comm.wait(second);
  comm.wait(first);
  comm.wait(empty);
  EXPECT_EQ(a, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(b, (std::vector<float>{3.0f}));
  // Every handle waited for: the next sum starts from the first handle again.
  EXPECT_EQ(comm.start_sum(a.data(), 2), first);
  comm.wait(first);
  comm.finalize();  // nothing to finalise without MPI; the layer stays usable
  EXPECT_FALSE(comm.broken());
  EXPECT_EQ(comm.max(1.0), 1.0);
}

}  // namespace
}  // namespace vit::distributed
