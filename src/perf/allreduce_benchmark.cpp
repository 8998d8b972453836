// Allreduce timing (see allreduce_benchmark.h).
#include "perf/allreduce_benchmark.h"

#include <algorithm>
#include <chrono>

namespace vit::perf {

std::vector<AllreduceTiming> time_allreduce(distributed::Comm& comm, const std::vector<int64_t>& sizes, int iters) {
  VIT_CHECK(iters >= 1, "bench", "--iters must be >= 1, got {}", iters);
  std::vector<AllreduceTiming> out;
  for (const int64_t bytes : sizes) {
    VIT_CHECK(bytes >= 4 && bytes <= (int64_t{1} << 31), "bench", "allreduce size {} bytes is out of range", bytes);
    std::vector<float> data(static_cast<size_t>(bytes / 4), 1.0f);
    std::vector<double> ms;
    for (int i = -3; i < iters; ++i) {
      comm.barrier();
      const auto from = std::chrono::steady_clock::now();
      comm.wait(comm.start_sum(data.data(), static_cast<int64_t>(data.size())));
      const double t =
          comm.max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count());
      if (i >= 0) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    AllreduceTiming timing;
    timing.bytes = static_cast<int64_t>(data.size()) * 4;
    timing.median_ms = ms[ms.size() / 2];
    const double n = comm.size();
    timing.bus_gb_per_s = static_cast<double>(timing.bytes) * 2.0 * (n - 1) / n / (timing.median_ms * 1e-3) / 1e9;
    out.push_back(timing);
  }
  return out;
}

}  // namespace vit::perf
