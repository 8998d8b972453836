// How many threads the kernels use: OpenMP's team size and OpenBLAS's, set together.
#pragma once

namespace vit::kernels {

// threads > 0: that many; 0: every core this process may run on (omp_get_num_procs()).
void set_num_threads(int threads);
// The threads the next parallel region will use.
int num_threads();

}  // namespace vit::kernels
