// How a GEMM is cut and threaded, one skeleton for the float32 (packed_gemm.cpp) and int8
// (int8_gemm.cpp) drivers, as gemma.cpp has one MatMul for every weight type. C (M, N) is a grid
// of micro-panels of mr rows by weight panels of 16 columns; the driver's block(m_begin, m_end,
// j_begin, j_end) computes one rectangle of it with its micro-kernel. The rule:
//  - one thread when called inside a parallel region, or for fewer than kParallelFlops
//    multiply-adds;
//  - else split the weight panels (each thread streams its own weights once) when there are at
//    least 4 per thread or too few rows to share; otherwise split the rows, in whole micro-panels.
// prepare(t, T) runs first on each of the T threads (the int8 driver quantizes its rows there),
// and every thread waits for all of them before its block.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace vit::kernels {

inline constexpr int64_t kParallelFlops = 1 << 18;  // below this many multiply-adds, one thread

template <typename Prepare, typename Block>
void run_gemm_grid(int64_t M, int64_t panels, int64_t mr, int64_t flops, Prepare&& prepare, Block&& block) {
  const int threads = omp_in_parallel() || flops < kParallelFlops ? 1 : omp_get_max_threads();
  if (threads == 1) {
    prepare(int64_t{0}, int64_t{1});
    block(int64_t{0}, M, int64_t{0}, panels);
    return;
  }
  const bool split_n = panels >= 4 * threads || M < 2 * mr * threads;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    prepare(t, T);
#pragma omp barrier
    if (split_n) {
      const int64_t j0 = panels * t / T, j1 = panels * (t + 1) / T;
      if (j0 < j1) block(int64_t{0}, M, j0, j1);
    } else {
      const int64_t micro = (M + mr - 1) / mr;
      const int64_t m0 = micro * t / T * mr, m1 = std::min(M, micro * (t + 1) / T * mr);
      if (m0 < m1) block(m0, m1, int64_t{0}, panels);
    }
  }
}

}  // namespace vit::kernels
