// `vit bench --convs`: each distinct convolution of a hybrid's backbone (and its patch embedding,
// a convolution of the backbone's map) timed alone at the given batch through the training
// kernels (kernels/conv/direct_conv.h: the forward, the input gradient, the weight gradient), at
// the process's thread count, as GFLOP/s and as a share of the float32 FMA peak measured in the
// same run x threads (zmm where the active ISA is AVX-512, else ymm; none below AVX2). Then what
// a training step's convolutions add up to at those rates (the stem's input gradient is not
// computed: images need none), and the whole step's or forward's share of that peak: the number
// issue #41's target is stated in (3 x forward MACs x 2 x images/s against the cores' peak).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/im2row.h"
#include "model/vit_config.h"
#include "perf/peak_probe.h"

namespace vit::perf {

struct ConvTiming {
  std::string name;  // the first module of the shape: "backbone.stages.0.0.conv1"
  kernels::ConvShape shape;
  int64_t out_channels = 0;
  int64_t calls = 0;         // convolutions of this shape in a forward
  bool input_grad = true;    // false for the stem (the images need no gradient)
  double gflop = 0;          // one pass: 2 x positions x OC x KH x KW x C
  double ms[3] = {0, 0, 0};  // forward, input gradient, weight gradient: the fastest call
  double gflops(int pass) const { return ms[pass] > 0 ? gflop / ms[pass] * 1e3 : 0.0; }
};

struct ConvReport {
  int threads = 1;
  std::string kernel;  // "avx2 6x16"
  Peaks peaks;         // per thread
  bool has_peak = false;
  Peak peak = Peak::Fma256;
  double peak_gflops = 0;  // the matching mix x threads
  std::vector<ConvTiming> convs;
  double forward_ms = 0;   // a forward's convolutions at these rates
  double training_ms = 0;  // a training step's (forward + the gradients)
  // The table, then the convolutions' part of the model's median (ms) and the model's share of the
  // peak at `model_gflops` (the bench's achieved rate).
  std::string to_text(double median_ms, double model_gflops, bool train) const;
  std::string to_json(double median_ms, double model_gflops, bool train) const;
};

// The distinct convolutions of `config`'s backbone and patch embedding at `batch` images, in forward
// order. Empty for a model without a backbone.
std::vector<ConvTiming> backbone_convs(const model::ViTConfig& config, int64_t batch);

// Times them (~50 ms per pass), then probes the peaks.
ConvReport time_backbone_convs(const model::ViTConfig& config, int64_t batch, uint64_t seed);

}  // namespace vit::perf
