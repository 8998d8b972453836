// `vit bench --gemms`: each distinct GEMM of an inference session's forward (infer/session_gemms.h:
// M = batch x tokens or batch, K, N, the fused epilogue) timed alone through the session's own entry
// point and packed weights, at the process's thread count, as GFLOP/s and as a share of the peak of
// the instruction mix its kernel runs (perf/peak_probe.h, measured in the same run, x threads):
//   fp32 (packed GEMM)  zmm FMA where the active ISA is AVX-512, else ymm FMA
//   bf16                vdpbf16ps (none where the plain C++ emulation runs)
//   int8                vpdpbusd with AVX512_VNNI, else the AVX2 vpmaddubsw+vpmaddwd step
//   fp32-blas           none (below AVX2: BLAS)
// and what a forward's GEMMs add up to at those rates (calls x time), against the model's measured
// median: the remainder is attention, LayerNorm and the other passes (an upper bound of them: a
// GEMM's time is its fastest call, the model's the median forward). The timed calls go round the
// blocks' weights of the shape (12 in ViT-B/16), so weights come from as far as in the forward (a
// GEMM repeated on one weight finds it in cache: ViT-B/16's bf16 GEMMs ran ~1.3x faster so); the
// activations stay warm, as they mostly are in the forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/inference.h"
#include "perf/peak_probe.h"

namespace vit::perf {

struct GemmTiming {
  std::string name, kernel, epilogue;  // "fc1", "fp32", "gelu" (infer/session_gemms.h)
  int64_t m = 0, k = 0, n = 0;
  int64_t calls = 0;  // per forward
  double ms = 0;      // one call, the fastest of the timed calls
  double gflops = 0;  // 2 M K N / time
  bool has_peak = false;
  Peak peak = Peak::Fma256;  // the matching mix (when has_peak)
  double peak_gflops = 0;    // its rate x threads
  double share = 0;          // gflops / peak_gflops
};

struct GemmReport {
  int threads = 1;
  Peaks peaks;                    // per thread
  std::vector<GemmTiming> gemms;  // in forward order
  double total_ms = 0;            // sum of calls x ms: a forward's GEMMs at these rates
  // The table for people, against the model's median and fastest forward (ms): on a shared
  // machine the median holds other processes' time slices, the fastest fewer.
  std::string to_text(double median_ms, double fastest_ms) const;
  // {"peaks": {...}, "gemms": [...], "gemm_ms": ..., "gemm_share": (of the median),
  //  "gemm_share_of_fastest": ...}
  std::string to_json(double median_ms, double fastest_ms) const;
};

// Times the GEMMs of `session`'s forward of `batch` images (of `config`), then probes the peaks.
// ~50 ms per GEMM (at least 5 calls and one per block after one warm-up), ~50 ms of probes.
GemmReport time_session_gemms(const infer::InferenceSession& session, const model::ViTConfig& config, int64_t batch,
                              uint64_t seed);

}  // namespace vit::perf
