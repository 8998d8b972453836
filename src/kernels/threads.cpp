// Thread counts for OpenMP and BLAS (see threads.h).
#include "kernels/threads.h"

#include <omp.h>

#include "core/check.h"
#include "kernels/gemm/gemm.h"

namespace vit::kernels {

void set_num_threads(int threads) {
  VIT_CHECK(threads >= 0, "threads", "the number of threads must be >= 0 (0: all cores), got {}", threads);
  const int n = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(n);
  set_blas_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace vit::kernels
