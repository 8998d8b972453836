// Fused float32 inference kernels (kernels/fused.h) tested directly: attention_inference against
// attention_forward_ref (no mask) and bias_tanh_inplace against bias_tanh_ref, on awkward sizes
// (tokens / rows / n from 1, 3, 7, 31, 33, 65, 197), several head counts and head dims, batch 1
// and > 1, 1 to 3 threads (the inference kernels split work by the thread count), and extreme
// inputs: scores large enough to saturate softmax, tanh at ±300, ±inf and NaN, no bias.
#include "kernels/fused.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

// Runs the body with omp_get_max_threads() == threads, then restores the previous setting.
template <typename F>
void with_threads(int threads, F&& body) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  body();
  omp_set_num_threads(saved);
}

std::string shape_str(const AttentionShape& s, int threads) {
  return " B=" + std::to_string(s.batch) + " N=" + std::to_string(s.tokens) + " NH=" + std::to_string(s.num_heads) +
         " HD=" + std::to_string(s.head_dim) + " threads=" + std::to_string(threads);
}

// Tokens from 1, 3, 7, 31, 33, 65, 197; batch 1 and > 1; head counts 1-6; head dims 1-16.
// (197, 3 heads of 8) and (65, 2 x 3 heads of 16) are above the kernel's threading threshold.
// (1, 50, 2, 64): a real head width (several 16-column panels of K^T and V).
const std::vector<AttentionShape> kShapes = {{1, 1, 1, 4},   {2, 1, 3, 2},  {1, 3, 2, 5},   {3, 7, 4, 3},
                                             {1, 31, 1, 8},  {2, 33, 6, 1}, {2, 65, 3, 16}, {1, 197, 3, 8},
                                             {2, 197, 2, 4}, {1, 50, 2, 64}};

// attention_inference against attention_forward_ref run in double on the same values, on every
// path the CPU has (the packed micro-kernels per ISA; BLAS below AVX2).
TEST(FusedAttentionInference, MatchesForwardReference) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > detected_isa()) continue;
    const ScopedIsaLimit level(isa);
    SCOPED_TRACE(isa_name(isa));
    for (const AttentionShape& s : kShapes) {
      const int64_t qkv_size = s.batch * s.tokens * 3 * s.dim(), out_size = s.batch * s.tokens * s.dim();
      const std::vector<float> qkv = random_vector<float>(qkv_size, 1 + static_cast<uint64_t>(s.tokens * s.dim()));
      for (double scale : {1.0 / std::sqrt(static_cast<double>(s.head_dim)), 0.3}) {
        std::vector<double> expected(out_size);
        attention_forward_ref<double>(s, to_double(qkv).data(), nullptr, scale, expected.data());
        for (int threads : {1, 2, 3}) {
          std::vector<float> out(out_size, std::numeric_limits<float>::quiet_NaN());  // every element is written
          with_threads(threads, [&] { attention_inference(s, qkv.data(), scale, out.data()); });
          EXPECT_TRUE(close(out, expected, test::tolerance_for<float>(),
                            "attention_inference" + shape_str(s, threads) + " scale=" + std::to_string(scale)));
        }
      }
    }
  }
}

// Saturated softmax: q and k hold integers, so every score (up to ~1e4) is exact in float and the
// softmax is (nearly) one-hot, with exact ties where scores are equal; the float kernel must then
// match the double reference to float precision.
TEST(FusedAttentionInference, SaturatedScoresMatchReference) {
  for (const AttentionShape& s : {AttentionShape{1, 7, 2, 4}, AttentionShape{2, 33, 3, 8},
                                  AttentionShape{1, 197, 2, 16}, AttentionShape{3, 3, 1, 1}}) {
    const int64_t qkv_size = s.batch * s.tokens * 3 * s.dim(), out_size = s.batch * s.tokens * s.dim();
    std::vector<float> qkv = random_vector<float>(qkv_size, 2 + static_cast<uint64_t>(s.tokens));
    for (int64_t t = 0; t < s.batch * s.tokens; ++t) {
      for (int64_t c = 0; c < 2 * s.dim(); ++c) {  // q and k (v stays N(0, 1))
        float& v = qkv[t * 3 * s.dim() + c];
        v = std::round(v * 8.0f);  // integers, |v| <~ 30
      }
    }
    for (double scale : {1.0, 0.5}) {
      std::vector<double> expected(out_size);
      attention_forward_ref<double>(s, to_double(qkv).data(), nullptr, scale, expected.data());
      for (int threads : {1, 2}) {
        std::vector<float> out(out_size);
        with_threads(threads, [&] { attention_inference(s, qkv.data(), scale, out.data()); });
        EXPECT_TRUE(close(out, expected, test::tolerance_for<float>(),
                          "attention_inference saturated" + shape_str(s, threads) + " scale=" + std::to_string(scale)));
      }
    }
  }
}

// Huge scores (|qkv| ~ 1e3, scores ~ 1e6): no overflow or NaN, and every output is a convex
// combination of its head's values, so it lies within their range for each (b, h, d).
TEST(FusedAttentionInference, HugeScoresStayFiniteAndConvex) {
  const AttentionShape s{2, 65, 2, 8};
  const int64_t D = s.dim(), N = s.tokens;
  const std::vector<float> qkv = random_vector<float>(s.batch * N * 3 * D, 3, 1e3);
  std::vector<float> out(s.batch * N * D);
  attention_inference(s, qkv.data(), 1.0 / std::sqrt(static_cast<double>(s.head_dim)), out.data());
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t c = 0; c < D; ++c) {  // c = h * HD + d
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t j = 0; j < N; ++j) {
        lo = std::min(lo, qkv[(b * N + j) * 3 * D + 2 * D + c]);
        hi = std::max(hi, qkv[(b * N + j) * 3 * D + 2 * D + c]);
      }
      const double slack = test::tolerance_for<float>() * std::max(std::fabs(lo), std::fabs(hi));
      for (int64_t i = 0; i < N; ++i) {
        const float o = out[(b * N + i) * D + c];
        ASSERT_TRUE(std::isfinite(o)) << "b " << b << " token " << i << " channel " << c;
        EXPECT_GE(o, lo - slack) << "b " << b << " token " << i << " channel " << c;
        EXPECT_LE(o, hi + slack) << "b " << b << " token " << i << " channel " << c;
      }
    }
  }
}

// bias_tanh_inplace against bias_tanh_ref in double, with and without bias, on 1 and 2 threads
// (an element-wise kernel: the thread count must not change a bit).
TEST(FusedBiasTanh, MatchesReference) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1},   {3, 7},   {7, 3},   {31, 33},
                                                          {33, 65}, {1, 197}, {65, 31}, {197, 197}};  // last: threaded
  for (auto [rows, n] : sizes) {
    const std::vector<float> y = random_vector<float>(rows * n, 4 + static_cast<uint64_t>(rows * n), 2.0);
    const std::vector<float> bias = random_vector<float>(n, 5);
    const std::vector<double> bias_double = to_double(bias);
    for (bool with_bias : {true, false}) {
      std::vector<double> expected = to_double(y);
      bias_tanh_ref<double>(expected.data(), with_bias ? bias_double.data() : nullptr, rows, n);
      std::vector<float> one_thread = y, two_threads = y, ref = y;
      with_threads(1, [&] { bias_tanh_inplace(one_thread.data(), with_bias ? bias.data() : nullptr, rows, n); });
      with_threads(2, [&] { bias_tanh_inplace(two_threads.data(), with_bias ? bias.data() : nullptr, rows, n); });
      bias_tanh_ref<float>(ref.data(), with_bias ? bias.data() : nullptr, rows, n);
      const std::string name =
          " " + std::to_string(rows) + "x" + std::to_string(n) + (with_bias ? " bias" : " no bias");
      EXPECT_TRUE(close(one_thread, expected, test::tolerance_for<float>(), "bias_tanh_inplace" + name));
      EXPECT_TRUE(close(two_threads, to_double(one_thread), test::kExactTol, "bias_tanh_inplace 2 threads" + name));
      EXPECT_TRUE(close(ref, expected, test::tolerance_for<float>(), "bias_tanh_ref<float>" + name));
    }
  }
}

// Saturation and special values: tanh(±300) and tanh(±inf) are exactly ±1, tanh(NaN) is NaN,
// tiny inputs keep their value, and a bias can cancel its input exactly.
TEST(FusedBiasTanh, ExtremeInputs) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-300.0f, 300.0f, -20.0f, 20.0f, -kInf, kInf, nan, 1e-30f, -1e-30f, 0.0f};
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<double> expected = {-1, 1, std::tanh(-20.0), std::tanh(20.0), -1, 1, NAN, 1e-30, -1e-30, 0};
  std::vector<float> y = x;
  bias_tanh_inplace(y.data(), nullptr, 1, n);
  EXPECT_TRUE(close(y, expected, test::tolerance_for<float>(), "bias_tanh_inplace extremes"));
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[7], 1e-30f);  // tanh(x) = x to float precision for tiny x
  std::vector<float> y_ref = x;
  bias_tanh_ref<float>(y_ref.data(), nullptr, 1, n);
  EXPECT_TRUE(close(y_ref, expected, test::tolerance_for<float>(), "bias_tanh_ref extremes"));

  // Two rows with a bias: row 0 cancels to exactly 0 where finite, row 1 saturates.
  std::vector<float> bias(n), rows2(2 * n);
  for (int64_t i = 0; i < n; ++i) {
    bias[i] = std::isfinite(x[i]) ? -x[i] : 0.0f;
    rows2[i] = x[i];
    rows2[n + i] = 1000.0f;
  }
  bias_tanh_inplace(rows2.data(), bias.data(), 2, n);
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) {
      EXPECT_EQ(rows2[i], 0.0f) << "x + (-x) at " << i;
    }
    EXPECT_EQ(rows2[n + i], 1.0f) << "1000 + bias at " << i;
  }
}

// The reference itself against known values of tanh.
TEST(FusedBiasTanh, ReferenceKnownValues) {
  std::vector<double> y = {0.5, -1.0, 2.0, 0.0};
  const std::vector<double> bias = {0.25, 1.0};
  bias_tanh_ref<double>(y.data(), bias.data(), 2, 2);
  // tanh(0.75), tanh(0), tanh(2.25), tanh(1)
  const std::vector<double> expected = {0.63514895238728731, 0.0, 0.97802611473881363, 0.76159415595576489};
  EXPECT_TRUE(close(y, expected, test::kDoubleKernelTol, "bias_tanh_ref known values"));
}

}  // namespace
}  // namespace vit::kernels

namespace vit::kernels {
namespace {

// QuickGELU and ReLU against their double references on awkward sizes (serial and threaded: n
// past 2^15 runs in parallel) and extreme inputs (±300, ±inf, NaN, -0).
TEST(FusedActivations, QuickGeluAndReluMatchTheirReferences) {
  for (int64_t n : {1, 3, 7, 31, 33, 65, 197, 40000}) {
    std::vector<float> x = random_vector<float>(n, static_cast<uint64_t>(n));
    for (auto& v : x) v *= 6.0f;
    const float extremes[] = {300.0f, -300.0f, 88.0f, -88.0f, -0.0f, 0.0f};
    for (size_t i = 0; i < std::size(extremes) && i < x.size(); ++i) x[i] = extremes[i];
    std::vector<float> q = x, r = x;
    quick_gelu_inplace(q.data(), n);
    relu_inplace(r.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want_q = quick_gelu_ref(x[i]), want_r = relu_ref(x[i]);
      EXPECT_NEAR(q[i], want_q, 1e-6 * (1.0 + std::fabs(want_q))) << "n=" << n << " x=" << x[i];
      EXPECT_EQ(r[i], static_cast<float>(want_r)) << "n=" << n << " x=" << x[i];
    }
  }
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  quick_gelu_inplace(nan.data(), 1);
  EXPECT_TRUE(std::isnan(nan[0]));
  relu_inplace(nan.data(), 1);
  EXPECT_TRUE(std::isnan(nan[0]));
  EXPECT_TRUE(std::isnan(quick_gelu_ref(std::nan(""))));
}

TEST(FusedResiduals, AddScaledRowsRowsToPlanesAndEmbedTokensMatchPlainLoops) {
  for (int64_t rows : {1, 7, 197}) {
    for (int64_t D : {1, 33, 65}) {
      const std::vector<float> branch = random_vector<float>(rows * D, 1), gamma = random_vector<float>(D, 2);
      std::vector<float> x = random_vector<float>(rows * D, 3), want = x;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < D; ++i) want[r * D + i] += branch[r * D + i] * gamma[i];
      }
      add_scaled_rows(x.data(), branch.data(), gamma.data(), rows, D);
      for (size_t i = 0; i < x.size(); ++i) {  // the kernel may fuse the multiply-add: one rounding apart
        ASSERT_NEAR(x[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << rows << "x" << D << " at " << i;
      }
    }
  }
  // rows_to_planes: a plain transpose per image.
  for (int64_t B : {1, 3}) {
    const int64_t HW = 7, S = 5;
    const std::vector<float> rows = random_vector<float>(B * HW * S, 9);
    std::vector<float> planes(rows.size());
    rows_to_planes(rows.data(), B, HW, S, planes.data());
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t i = 0; i < HW; ++i) ASSERT_EQ(planes[(b * S + s) * HW + i], rows[(b * HW + i) * S + s]);
      }
    }
  }
  // Two images of 1 + 2 prefix rows and 4 patches, the position table with and without the prefix.
  const int64_t B = 2, prefix = 3, N = prefix + 4, D = 5;
  const std::vector<float> cls = random_vector<float>(D, 4), dist = random_vector<float>(D, 5),
                           reg = random_vector<float>(D, 6), patches = random_vector<float>(B * (N - prefix) * D, 7),
                           pos = random_vector<float>(N * D, 8);
  const float* prefix_rows[] = {cls.data(), dist.data(), reg.data()};
  for (bool covers : {true, false}) {
    std::vector<float> x(static_cast<size_t>(B * N * D));
    embed_tokens(prefix_rows, prefix, patches.data(), pos.data(), covers, B, N, D, x.data());
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < N; ++t) {
        for (int64_t i = 0; i < D; ++i) {
          const float src = t < prefix ? prefix_rows[t][i] : patches[(b * (N - prefix) + t - prefix) * D + i];
          const float p = covers ? pos[t * D + i] : (t < prefix ? 0.0f : pos[(t - prefix) * D + i]);
          const float want = covers || t >= prefix ? src + p : src;
          ASSERT_EQ(x[(b * N + t) * D + i], want) << "covers=" << covers << " b=" << b << " t=" << t << " i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace vit::kernels
