// How many threads the kernels use: OpenMP's team size and OpenBLAS's, set together.
#pragma once

#include <omp.h>

#include <cstdint>

namespace vit::kernels {

// body(i) for i in [0, n): over the threads when `big` and a team is to be had, else a plain loop
// on the calling thread. A `#pragma omp parallel ... if (false)` still builds a team of one (a
// malloc'd team when nested, as every op is inside a data-parallel replica): ~4% of the
// small-model step in malloc, malloc_consolidate and libgomp.
// Whether a region of `big` work should start a team: more than one thread to be had and not
// already inside a parallel region.
inline bool parallel_worth(bool big) { return big && omp_get_max_threads() > 1 && !omp_in_parallel(); }

template <typename Body>
inline void parallel_for(int64_t n, bool big, Body&& body) {
  if (n > 1 && parallel_worth(big)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) body(i);
}

// threads > 0: that many; 0: every core this process may run on (omp_get_num_procs()).
void set_num_threads(int threads);
// The threads the next parallel region will use.
int num_threads();

}  // namespace vit::kernels
