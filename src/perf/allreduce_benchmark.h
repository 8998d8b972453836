// The sum over the ranks of an MPI job (the gradient allreduce), timed: `vit bench --allreduce`
// under mpirun. Feeds the scaling model in docs/training.md (MPI) (measured bandwidth on loopback).
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/comm.h"

namespace vit::perf {

struct AllreduceTiming {
  int64_t bytes = 0;
  double median_ms = 0.0;
  // Bus bandwidth, as nccl-tests define it: a ring allreduce moves 2 (N-1)/N of the data through
  // each rank's link, so bytes * 2 (N-1)/N / time is the link speed it achieved.
  double bus_gb_per_s = 0.0;
};

// Each size summed `iters` times (after 3 untimed) in float32; the median over iterations of the
// slowest rank's time. Every rank must call it with the same arguments.
std::vector<AllreduceTiming> time_allreduce(distributed::Comm& comm, const std::vector<int64_t>& bytes, int iters);

}  // namespace vit::perf
