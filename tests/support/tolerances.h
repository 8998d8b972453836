// The one table of numeric tolerances for the test suite: every bound that a test puts on a
// computed number is named here, with what it is for. A test that needs a tighter or looser bound
// than an existing entry gets its own entry (and a reason), never a literal.
//
// How a bound is applied is said beside each entry:
//   scaled:   |actual - expected| <= tol * (|expected| + max|expected|), element-wise over a tensor
//             (kernels/kernel_test_util.h close() and support/golden.h all_close()); the second
//             term keeps near-zero entries of a large tensor from an impossible bound.
//   gradient: |analytic - numeric| <= tol * (1 + |numeric|) against central differences in double.
//   absolute: |actual - expected| <= tol (times the magnitude named, where one is).
#pragma once

namespace vit::testing {

// A relative tolerance for all_close() (support/golden.h): scaled, as above.
struct Tolerance {
  double rtol;
};

// ---- Exact ----
inline constexpr double kExactTol = 0.0;       // results that must agree bit for bit
inline constexpr Tolerance kExact{kExactTol};  // the same, for all_close()

// ---- Kernels against their references (scaled) ----
inline constexpr double kFloatKernelTol = 1e-5;    // float32 fast kernel vs a double reference
inline constexpr double kDoubleKernelTol = 1e-12;  // float64 fast kernel vs a double reference
// Two float32 computations of one op through different kernels (e.g. patch embedding as a
// convolution vs unfold + linear): the same products, summed in another order.
inline constexpr Tolerance kFloatSameOpTol{2e-6};
// linear_forward's float32 micro-kernel vs a double dot product; absolute, per element, relative
// to 1 + sum_k |a_k w_k| (the dot product's own rounding scale).
inline constexpr double kLinearKernelTol = 2e-6;

// ---- Double-precision formulas (absolute, times 1 + |expected| or the magnitude named) ----
// Two double evaluations of one quantity by different formulas (a loss in double inside the
// kernel vs its reference, an activation's reference vs an independent closed form, a schedule).
inline constexpr double kDoubleFormulaTol = 1e-12;
// A double result of order 1 that is exact up to a few ulps (log K for uniform logits).
inline constexpr double kDoubleUlpTol = 1e-15;
// Relative: the variance of 1000 values offset by 1e6 (a two-pass variance keeps ~10 digits there).
inline constexpr double kLargeOffsetVarianceTol = 1e-6;

// ---- Central-difference gradient checks in double (gradient) ----
inline constexpr double kFiniteDiffStep = 1e-6;      // the step h of (f(x + h) - f(x - h)) / 2h
inline constexpr double kKernelGradcheckTol = 1e-7;  // a kernel forward/backward pair (one op, raw loops)
inline constexpr double kGradcheckTol = 1e-6;        // an autograd op or layer (gradients through a graph)

// ---- Float32 values against exact ones (absolute) ----
inline constexpr double kFloatUlpTol = 1e-7;    // one or two float32 ulps at values in [0.5, 1)
inline constexpr double kFloatValueTol = 1e-6;  // a float32 result of order 1 (about 10 ulps)
// A float32 result of order 1 after a norm, a sum or a blend (a few more roundings than
// kFloatValueTol allows): gradient norms, a blended pixel, a loss summed in another order.
inline constexpr double kFloatSumTol = 1e-5;
inline constexpr double kFloatLargeValueTol = 1e-4;  // a float32 result of order 50 (about 20 ulps)
// Expected values that underflow in float32: checked relatively above this absolute floor.
inline constexpr double kFloatTinyAbsTol = 1e-40;

// ---- Whole models and data ----
inline constexpr Tolerance kGoldenFloatTol{1e-5};    // a float32 run vs PyTorch's float64 answer (scaled)
inline constexpr Tolerance kGoldenDoubleTol{1e-10};  // a float64 run vs PyTorch's float64 answer (scaled)
// Parameters and losses after five float32 optimiser steps vs PyTorch (scaled): rounding of
// values ~0.02-1 accumulates over the steps, but stays far below this.
inline constexpr Tolerance kGoldenFloatStepsTol{1e-4};
// Weights after three float32 AdamW fine-tuning steps at lr 1e-2 vs PyTorch (scaled): where an
// element's gradient is near rounding noise, Adam's normalised step (up to lr a step) follows the
// noise on either side, so finals differ by ~1e-4 of the weights' scale; a wrong learning-rate
// group (layer decay) moves every element by ~lr x steps x 0.25, far above this.
inline constexpr Tolerance kFinetuneFinalTol{2e-3};
// Data-parallel gradients vs one replica's (scaled): float32 sums over replicas in another order.
inline constexpr Tolerance kDataParallelGradTol{2e-5};
// The fused inference session's float32 logits vs the autograd graph's; absolute, times
// max(1, max|logit|).
inline constexpr double kInferenceLogitTol = 2e-5;
// Logits of a converted pretrained checkpoint vs PyTorch's; absolute, times max|logit| (the
// project's parity target).
inline constexpr double kPretrainedLogitTol = 1e-4;
// Mean |ours - theirs| of a preprocessed image (values in [0, 1]) vs torchvision: one grey
// level, and a quarter of one for the PIL-exact resampling filters.
inline constexpr double kPreprocessMeanAbsTol = 1.0 / 255.0;
inline constexpr double kPilExactMeanAbsTol = 0.25 / 255.0;

// ---- bfloat16 mixed precision (MatmulPrecision::BF16) ----
// Gradients and outputs of a bf16 training step vs float32 on the unrounded values (scaled): each
// GEMM operand keeps 8 significant bits (relative error up to 2^-9), through a few layers.
inline constexpr Tolerance kBf16VsFloatTol{2e-2};
// ... and the least they must differ by (max |difference| / max |float32 value|): the bf16 path ran.
inline constexpr double kBf16MinDifference = 1e-4;

// ---- Seeded random sampling (fixed seeds; bounds a fair sample meets with room to spare) ----
inline constexpr double kSamplingSigmas = 5.0;         // binomial fluctuation allowed, in standard deviations
inline constexpr double kDropoutFractionTol = 0.03;    // kept fraction of 10000 draws at p = 0.5 (6 sd)
inline constexpr double kRandnMeanTol = 0.1;           // mean of 1000 N(0, 1) draws (3 sd)
inline constexpr double kRandnSecondMomentTol = 0.15;  // mean square of 1000 N(0, 1) draws (3 sd)
// CutMix's lam (the area not pasted) vs the fraction of pixels equal to the image's own: pasted
// pixels that happen to equal the original (a shared background) count as kept.
inline constexpr double kCutmixLamTol = 0.1;
// AdamW moves a weight by at most lr per step; 1% slack for the bias correction's rounding.
inline constexpr double kAdamStepBoundFactor = 1.01;

}  // namespace vit::testing
