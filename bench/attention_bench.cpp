// Fused attention: the fast kernel (BLAS per head + vectorised softmax) against the reference
// loops, forward; and the fast forward + backward step. Shapes: the digits model (batch 128, 17
// tokens, 4 heads of 16) and ViT-S/16 (batch 1, 197 tokens, 6 heads of 64).
#include <benchmark/benchmark.h>

#include <cmath>

#include "core/tensor.h"
#include "kernels/attention.h"

namespace {

using vit::kernels::AttentionShape;

struct Buffers {
  explicit Buffers(const AttentionShape& s) {
    vit::Generator gen(0);
    qkv = vit::Tensor::randn({s.batch, s.tokens, 3 * s.dim()}, gen);
    dout = vit::Tensor::randn({s.batch, s.tokens, s.dim()}, gen);
    probs = vit::Tensor::empty({s.batch, s.num_heads, s.tokens, s.tokens});
    out = vit::Tensor::empty({s.batch, s.tokens, s.dim()});
    dqkv = vit::Tensor::zeros(qkv.shape());
  }
  vit::Tensor qkv, dout, probs, out, dqkv;
};

double forward_flops(const AttentionShape& s) {
  return 2.0 * 2.0 * static_cast<double>(s.batch * s.num_heads * s.tokens * s.tokens * s.head_dim);
}

void forward_fast(benchmark::State& state, AttentionShape s) {
  Buffers b(s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (auto _ : state) {
    vit::kernels::attention_forward<float>(s, b.qkv.data<float>(), nullptr, scale, b.probs.data<float>(),
                                           b.out.data<float>());
    benchmark::DoNotOptimize(b.out.data<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(forward_flops(s), benchmark::Counter::kIsIterationInvariantRate);
}

void forward_ref(benchmark::State& state, AttentionShape s) {
  Buffers b(s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (auto _ : state) {
    vit::kernels::attention_forward_ref<float>(s, b.qkv.data<float>(), nullptr, scale, b.out.data<float>());
    benchmark::DoNotOptimize(b.out.data<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(forward_flops(s), benchmark::Counter::kIsIterationInvariantRate);
}

void forward_backward_fast(benchmark::State& state, AttentionShape s) {
  Buffers b(s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (auto _ : state) {
    vit::kernels::attention_forward<float>(s, b.qkv.data<float>(), nullptr, scale, b.probs.data<float>(),
                                           b.out.data<float>());
    vit::kernels::attention_backward<float>(s, b.qkv.data<float>(), b.probs.data<float>(), nullptr, scale,
                                            b.dout.data<float>(), b.dqkv.data<float>());
    benchmark::DoNotOptimize(b.dqkv.data<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(3 * forward_flops(s), benchmark::Counter::kIsIterationInvariantRate);
}

const AttentionShape kDigits{128, 17, 4, 16};
const AttentionShape kSmall{1, 197, 6, 64};
BENCHMARK_CAPTURE(forward_ref, digits, kDigits)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(forward_fast, digits, kDigits)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(forward_backward_fast, digits, kDigits)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(forward_ref, vit_s, kSmall)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(forward_fast, vit_s, kSmall)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(forward_backward_fast, vit_s, kSmall)->Unit(benchmark::kMicrosecond);

}  // namespace
