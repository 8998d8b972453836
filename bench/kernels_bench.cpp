// Kernel microbenchmarks at ViT shapes: GEMM (BLAS vs the reference loop) for the linear layers
// of ViT-Ti/S/B at batch 1 (197 tokens), LayerNorm, softmax and GELU (fast vs reference),
// patch embedding (im2row + GEMM). Counters: GFLOP/s or GB/s.
#include <benchmark/benchmark.h>
#include <omp.h>

#include "core/tensor.h"
#include "kernels/activation.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/im2row.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/softmax.h"
#include "peak_probe.h"

namespace {

using vit::Tensor;

// GFLOP/s and the fraction of the measured FMA peak (peak_probe.h) of the threads in use, at the
// vector width the active ISA allows (VIT_ISA=avx2: 256-bit): run with OMP_NUM_THREADS=1 for the
// single-core fraction.
void gemm_counters(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = vit::bench::active_fma_peak_gflops() * 1e9 * omp_get_max_threads();
  state.counters["of_peak"] = benchmark::Counter(flops / peak, benchmark::Counter::kIsIterationInvariantRate);
}

Tensor random(const vit::Shape& shape) {
  vit::Generator gen(1);
  return Tensor::randn(shape, gen);
}

// y (M, N) = x (M, K) @ W (N, K)^T, as Linear does.
template <bool Reference>
void linear_gemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const Tensor x = random({M, K}), w = random({N, K});
  Tensor y = Tensor::empty({M, N});
  for (auto _ : state) {
    if constexpr (Reference) {
      vit::kernels::gemm_ref<float>(false, true, M, N, K, 1.0f, x.data<float>(), K, w.data<float>(), K, 0.0f,
                                    y.data<float>(), N);
    } else {
      vit::kernels::gemm<float>(false, true, M, N, K, 1.0f, x.data<float>(), K, w.data<float>(), K, 0.0f,
                                y.data<float>(), N);
    }
    benchmark::DoNotOptimize(y.data<float>());
  }
  gemm_counters(state, 2.0 * M * N * K);
}

// ViT-Ti (192), ViT-S (384), ViT-B (768): qkv, proj, fc1, fc2 at 197 tokens.
void vit_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t d : {192, 384, 768}) {
    b->Args({197, 3 * d, d})->Args({197, d, d})->Args({197, 4 * d, d})->Args({197, d, 4 * d});
  }
}
BENCHMARK(linear_gemm<false>)->Apply(vit_shapes)->Unit(benchmark::kMicrosecond);

// The inference path's fused Linear (kernels/linear.h: weights in place, activations packed,
// bias in the epilogue) on the same shapes, against linear_gemm<false> (BLAS, no bias).
void linear_fused(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const Tensor x = random({M, K}), w = random({N, K}), bias = random({N});
  Tensor y = Tensor::empty({M, N});
  for (auto _ : state) {
    vit::kernels::linear_forward<float>(x.data<float>(), M, K, K, w.data<float>(), N, bias.data<float>(),
                                        y.data<float>(), N, vit::kernels::Epilogue::Store);
    benchmark::DoNotOptimize(y.data<float>());
  }
  gemm_counters(state, 2.0 * M * N * K);
}
BENCHMARK(linear_fused)->Apply(vit_shapes)->Unit(benchmark::kMicrosecond);

// The packed GEMM (kernels/gemm/packed_gemm.h) with the weights packed once, as the inference
// session does: the number the >= 90%-of-peak target is about.
void linear_packed(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const Tensor x = random({M, K}), w = random({N, K}), bias = random({N});
  const auto packed = vit::kernels::PackedMatrix::from_weight(w.data<float>(), N, K);
  Tensor y = Tensor::empty({M, N});
  vit::kernels::Epilogue e;
  e.act = static_cast<vit::kernels::Activation>(state.range(3));  // 0 none, 1 GELU, 2 GELU (tanh)
  e.beta = static_cast<float>(state.range(4));                    // 1: accumulate (residual)
  for (auto _ : state) {
    vit::kernels::packed_gemm(false, x.data<float>(), K, M, packed.data(), K, N, y.data<float>(), N, bias.data<float>(),
                              e);
    benchmark::DoNotOptimize(y.data<float>());
  }
  gemm_counters(state, 2.0 * M * N * K);
}
void vit_shapes_epilogues(benchmark::internal::Benchmark* b) {
  for (int64_t d : {192, 384, 768}) {  // the epilogues the inference session uses on each
    b->Args({197, 3 * d, d, 0, 0})->Args({197, d, d, 0, 1})->Args({197, 4 * d, d, 1, 0})->Args({197, d, 4 * d, 0, 1});
    b->Args({197, 4 * d, d, 0, 0});  // fc1's shape with a plain store: the price of its GELU
  }
}
BENCHMARK(linear_packed)->Apply(vit_shapes_epilogues)->Unit(benchmark::kMicrosecond);

// The int8 linear layer (kernels/gemm/int8_gemm.h) on the same shapes and epilogues: weights quantized
// and packed once, activations quantized per row in every call. GFLOP/s counts the same 2 M N K
// (of_peak: against the float FMA peak, so > 1 is possible).
void linear_int8(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const Tensor x = random({M, K}), w = random({N, K}), bias = random({N});
  std::vector<int8_t> q(static_cast<size_t>(N * K));
  std::vector<float> scale(static_cast<size_t>(N));
  vit::kernels::quantize_weight(w.data<float>(), N, K, q.data(), scale.data());
  const auto packed = vit::kernels::Int8Matrix::from_quantized(q.data(), scale.data(), N, K);
  Tensor y = Tensor::zeros({M, N});
  const auto act = state.range(3), beta = state.range(4);
  const auto e = beta       ? vit::kernels::Epilogue::Accumulate
                 : act == 1 ? vit::kernels::Epilogue::Gelu
                 : act == 2 ? vit::kernels::Epilogue::GeluTanh
                            : vit::kernels::Epilogue::Store;
  for (auto _ : state) {
    vit::kernels::linear_int8(x.data<float>(), M, K, K, packed, bias.data<float>(), y.data<float>(), N, e);
    benchmark::DoNotOptimize(y.data<float>());
  }
  gemm_counters(state, 2.0 * M * N * K);
}
BENCHMARK(linear_int8)->Apply(vit_shapes_epilogues)->Unit(benchmark::kMicrosecond);
// The digits ViT's training shapes (one replica: 64 images x 16 tokens, dim 64, MLP 128).
void digits_shapes(benchmark::internal::Benchmark* b) {
  b->Args({1024, 192, 64})->Args({1024, 64, 64})->Args({1024, 128, 64})->Args({1024, 64, 128});
}
BENCHMARK(linear_fused)->Apply(digits_shapes)->Unit(benchmark::kMicrosecond)->Name("linear_fused_digits");
BENCHMARK(linear_gemm<false>)->Apply(digits_shapes)->Unit(benchmark::kMicrosecond)->Name("linear_gemm_digits");

// Cold weights, as in a real forward pass (a model is larger than the caches): each iteration
// uses the next of 16 weight matrices (ViT-B fc1: 16 x 9.4 MB). range(3): 1 fused, 0 BLAS.
void linear_cold(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const int64_t mode = state.range(3);  // 2: packed once, 1: linear_forward (packs per call), 0: BLAS
  const Tensor x = random({M, K}), bias = random({N});
  std::vector<Tensor> ws;
  std::vector<vit::kernels::PackedMatrix> packed;
  for (int i = 0; i < 16; ++i) {
    ws.push_back(random({N, K}));
    if (mode == 2) packed.push_back(vit::kernels::PackedMatrix::from_weight(ws.back().data<float>(), N, K));
  }
  if (mode == 2) ws.clear();
  Tensor y = Tensor::empty({M, N});
  size_t i = 0;
  for (auto _ : state) {
    const size_t n = i++ % 16;
    if (mode == 2) {
      vit::kernels::linear_forward_packed(x.data<float>(), M, K, K, packed[n], bias.data<float>(), y.data<float>(), N,
                                          vit::kernels::Epilogue::Store);
    } else if (mode == 1) {
      vit::kernels::linear_forward<float>(x.data<float>(), M, K, K, ws[n].data<float>(), N, bias.data<float>(),
                                          y.data<float>(), N, vit::kernels::Epilogue::Store);
    } else {
      vit::kernels::gemm<float>(false, true, M, N, K, 1.0f, x.data<float>(), K, ws[n].data<float>(), K, 0.0f,
                                y.data<float>(), N);
    }
    benchmark::DoNotOptimize(y.data<float>());
  }
  gemm_counters(state, 2.0 * M * N * K);
}
BENCHMARK(linear_cold)
    ->Args({197, 3072, 768, 2})
    ->Args({197, 3072, 768, 1})
    ->Args({197, 768, 3072, 2})
    ->Args({197, 768, 3072, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(linear_gemm<true>)->Args({197, 576, 192})->Unit(benchmark::kMillisecond);

template <bool Reference>
void layernorm(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1);
  const Tensor x = random({rows, n}), w = Tensor::ones({n}), b = Tensor::zeros({n});
  Tensor y = Tensor::empty({rows, n}), mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});
  for (auto _ : state) {
    if constexpr (Reference) {
      vit::kernels::layernorm_forward_ref<float>(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(),
                                                 rows, n, 1e-6);
    } else {
      vit::kernels::layernorm_forward<float>(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(),
                                             mean.data<float>(), rstd.data<float>(), rows, n, 1e-6);
    }
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["GB/s"] = benchmark::Counter(8.0 * rows * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(layernorm<false>)->Args({197, 768})->Args({128 * 17, 64})->Unit(benchmark::kMicrosecond);
BENCHMARK(layernorm<true>)->Args({197, 768})->Args({128 * 17, 64})->Unit(benchmark::kMicrosecond);

template <bool Reference>
void softmax_rows(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1);
  const Tensor x = random({rows, n});
  Tensor y = Tensor::empty({rows, n});
  for (auto _ : state) {
    if constexpr (Reference)
      vit::kernels::softmax_forward_ref<float>(x.data<float>(), y.data<float>(), rows, n);
    else
      vit::kernels::softmax_forward<float>(x.data<float>(), y.data<float>(), rows, n);
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["GB/s"] = benchmark::Counter(8.0 * rows * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(softmax_rows<false>)->Args({12 * 197, 197})->Unit(benchmark::kMicrosecond);
BENCHMARK(softmax_rows<true>)->Args({12 * 197, 197})->Unit(benchmark::kMicrosecond);

// GELU over ViT-B's MLP activations (197 x 3072): the vectorised float path vs double reference.
void gelu_fast(benchmark::State& state) {
  const Tensor x = random({197 * 3072});
  Tensor y = Tensor::empty({197 * 3072});
  for (auto _ : state) {
    vit::kernels::unary_forward<float>(vit::kernels::Unary::Gelu, x.data<float>(), y.data<float>(), x.numel());
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["GB/s"] = benchmark::Counter(8.0 * x.numel(), benchmark::Counter::kIsIterationInvariantRate);
}
void gelu_reference(benchmark::State& state) {
  const Tensor x = random({197 * 3072});
  Tensor y = Tensor::empty({197 * 3072});
  const float* in = x.data<float>();
  float* out = y.data<float>();
  for (auto _ : state) {
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] = static_cast<float>(vit::kernels::unary_ref(vit::kernels::Unary::Gelu, in[i]));
    benchmark::DoNotOptimize(out);
  }
  state.counters["GB/s"] = benchmark::Counter(8.0 * x.numel(), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(gelu_fast)->Unit(benchmark::kMicrosecond);
BENCHMARK(gelu_reference)->Unit(benchmark::kMicrosecond);

// Patch embedding of one 224x224 image for ViT-B: im2row then GEMM (196 x 768 x 768).
void patch_embedding(benchmark::State& state) {
  const vit::kernels::ConvShape s{1, 3, 224, 224, 16, 16, 16, 0};
  const Tensor x = random({1, 3, 224, 224}), w = random({768, 768});
  Tensor rows = Tensor::empty({196, 768}), y = Tensor::empty({196, 768});
  for (auto _ : state) {
    vit::kernels::im2row<float>(s, x.data<float>(), rows.data<float>());
    vit::kernels::gemm<float>(false, true, 196, 768, 768, 1.0f, rows.data<float>(), 768, w.data<float>(), 768, 0.0f,
                              y.data<float>(), 768);
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 196 * 768 * 768, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(patch_embedding)->Unit(benchmark::kMicrosecond);

}  // namespace
