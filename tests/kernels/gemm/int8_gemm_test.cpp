// The int8 linear layer: the AVX-512 VNNI and AVX2 kernels against the plain path (integers
// bit-exact), all against a direct computation from the scheme's definition, for 7- and 8-bit
// weights (the AVX2 kernel's signed-shift form for the latter), the int16 saturation cases,
// awkward sizes, NaN rows, and refused weights.
#include "kernels/gemm/int8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/check.h"
#include "kernels/cpu_features.h"

namespace vit::kernels {
namespace {

// The three paths on one machine, by capping the ISA: the best (AVX-512 VNNI where it runs), AVX2,
// and the plain one.
constexpr Isa kPaths[] = {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar};

void accumulators_at(Isa path, const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, int32_t* acc,
                     RowQuantization* rows) {
  const ScopedIsaLimit limit(path);
  int8_accumulators(A, M, K, lda, W, acc, rows);
}

void linear_int8_at(Isa path, const float* A, int64_t M, int64_t K, int64_t lda, const Int8Matrix& W, const float* bias,
                    float* C, int64_t ldc, const Epilogue& e) {
  const ScopedIsaLimit limit(path);
  linear_int8(A, M, K, lda, W, bias, C, ldc, e);
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

struct Weight {
  std::vector<int8_t> q;
  std::vector<float> scale;
  Int8Matrix packed;
};

Weight make_weight(int64_t N, int64_t K, uint32_t seed, int bits = 7) {
  Weight w;
  const std::vector<float> f = random_floats(N * K, seed, 0.05f);
  w.q.resize(static_cast<size_t>(N * K));
  w.scale.resize(static_cast<size_t>(N));
  EXPECT_EQ(quantize_weight(f.data(), N, K, w.q.data(), w.scale.data(), bits), -1);
  w.packed = Int8Matrix::from_quantized(w.q.data(), w.scale.data(), N, K, bits);
  return w;
}

TEST(Int8Gemm, QuantizeWeightFollowsTheDefinition) {
  // Row 0: max |w| = 63, so the scale is exactly 1 and the halves show the rounding (to even).
  const std::vector<float> W = {63.0f, 0.5f, 1.5f, -2.5f, 0.0f, 0.0f, 0.0f, 0.0f, 3.0f, 1.5f, -0.75f, 0.1f};
  std::vector<int8_t> q(12);
  std::vector<float> s(3);
  ASSERT_EQ(quantize_weight(W.data(), 3, 4, q.data(), s.data()), -1);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 63);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(s[1], 1.0f);  // a row of zeros
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(s[2], 3.0f / 63.0f);
  EXPECT_EQ(q[8], 63);
  EXPECT_EQ(q[9], static_cast<int8_t>(std::nearbyint(1.5f / s[2])));
  EXPECT_EQ(q[10], static_cast<int8_t>(std::nearbyint(-0.75f / s[2])));
  std::vector<float> bad = W;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(quantize_weight(bad.data(), 3, 4, q.data(), s.data()), 5);
}

TEST(Int8Gemm, QuantizeRowFollowsTheDefinition) {
  const std::vector<float> x = {-1.0f, 0.0f, 0.5f, 3.0f};
  std::vector<uint8_t> q(4);
  const RowQuantization r = quantize_row(x.data(), 4, q.data());
  EXPECT_FLOAT_EQ(r.scale, 4.0f / 255.0f);
  EXPECT_EQ(r.zero_point, static_cast<int32_t>(std::nearbyint(1.0f * (1.0f / r.scale))));
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], r.zero_point);
  EXPECT_EQ(q[3], 255);
  // All positive: the range still includes 0 (zero point 0); all zeros: scale 1.
  const std::vector<float> pos = {1.0f, 2.0f};
  EXPECT_EQ(quantize_row(pos.data(), 2, q.data()).zero_point, 0);
  const std::vector<float> zeros = {0.0f, 0.0f, 0.0f};
  const RowQuantization z = quantize_row(zeros.data(), 3, q.data());
  EXPECT_EQ(z.scale, 1.0f);
  EXPECT_EQ(q[0], 0);
  const std::vector<float> neg = {-2.0f, -1.0f};
  EXPECT_EQ(quantize_row(neg.data(), 2, q.data()).zero_point, 255);
}

// The integers of every path, bit for bit, and against a direct computation, 7- and 8-bit weights.
TEST(Int8Gemm, AccumulatorsAreExactOnAwkwardSizes) {
  uint32_t seed = 1;
  for (int bits : {7, 8}) {
    for (int64_t M : {1, 3, 4, 5, 8, 9, 13, 197}) {
      for (int64_t N : {1, 15, 16, 17, 40}) {
        for (int64_t K : {1, 3, 4, 5, 9, 64, 771}) {
          const Weight w = make_weight(N, K, seed++, bits);
          const int64_t lda = K + 3;  // a row stride wider than K
          std::vector<float> A = random_floats(M * lda, seed++, 2.0f);
          if (M > 2) {
            for (int64_t k = 0; k < K; ++k) A[static_cast<size_t>(2 * lda + k)] = 0.0f;  // an all-zero row
          }
          std::vector<int32_t> fast(static_cast<size_t>(M * N)), plain(static_cast<size_t>(M * N));
          std::vector<RowQuantization> rf(static_cast<size_t>(M)), rp(static_cast<size_t>(M));
          accumulators_at(Isa::Avx512Vnni, A.data(), M, K, lda, w.packed, fast.data(), rf.data());
          accumulators_at(Isa::Scalar, A.data(), M, K, lda, w.packed, plain.data(), rp.data());
          ASSERT_EQ(fast, plain) << M << "x" << N << "x" << K << ", " << bits << " bits";
          std::vector<int32_t> avx2(static_cast<size_t>(M * N));
          std::vector<RowQuantization> ra(static_cast<size_t>(M));
          accumulators_at(Isa::Avx2, A.data(), M, K, lda, w.packed, avx2.data(), ra.data());  // without VNNI
          ASSERT_EQ(avx2, plain) << M << "x" << N << "x" << K << ", " << bits << " bits";
          for (int64_t m = 0; m < M; ++m) {
            ASSERT_EQ(rf[m].scale, rp[m].scale) << m;
            ASSERT_EQ(rf[m].zero_point, rp[m].zero_point) << m;
            std::vector<uint8_t> qa(static_cast<size_t>(K));
            quantize_row(A.data() + m * lda, K, qa.data());
            for (int64_t n = 0; n < N; ++n) {
              int64_t sum = 0;
              for (int64_t k = 0; k < K; ++k) sum += int64_t{qa[k]} * w.q[static_cast<size_t>(n * K + k)];
              ASSERT_EQ(plain[static_cast<size_t>(m * N + n)], sum) << m << "," << n;
            }
          }
        }
      }
    }
  }
}

// 255 x 63 in every pair: the largest int16 sum vpmaddubsw can form here (32130); 8-bit weights
// (127) would saturate it. Mixed signs in a pair check the other direction.
TEST(Int8Gemm, NoSaturationAtTheExtremes) {
  const int64_t M = 5, N = 17, K = 260;
  std::vector<int8_t> q(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k)
      q[static_cast<size_t>(n * K + k)] = n % 3 == 0 ? 63 : n % 3 == 1 ? -63 : (k % 2 ? 63 : -63);
  }
  const std::vector<float> scale(static_cast<size_t>(N), 1.0f);
  const Int8Matrix w = Int8Matrix::from_quantized(q.data(), scale.data(), N, K);
  std::vector<float> A(static_cast<size_t>(M * K), 7.0f);  // all equal and positive: every byte 255
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  std::vector<RowQuantization> rows(static_cast<size_t>(M));
  for (Isa path : kPaths) {
    accumulators_at(path, A.data(), M, K, K, w, acc.data(), rows.data());
    for (int64_t m = 0; m < M; ++m) {
      EXPECT_EQ(rows[m].zero_point, 0);
      for (int64_t n = 0; n < N; ++n) {
        const int32_t want = n % 3 == 0 ? 255 * 63 * K : n % 3 == 1 ? -255 * 63 * K : 0;
        ASSERT_EQ(acc[static_cast<size_t>(m * N + n)], want) << m << "," << n;
      }
    }
    // And the float result: 7 * 63 * K * (7/255 * 1) / ... = the exact product of the dequantised values.
    std::vector<float> C(static_cast<size_t>(M * N));
    linear_int8_at(path, A.data(), M, K, K, w, nullptr, C.data(), N, Epilogue::Store);
    EXPECT_NEAR(C[0], 255.0f * (7.0f / 255.0f) * 63.0f * static_cast<float>(K), 1e-2f);
  }
}

// 8-bit weights at +-127 against activation bytes of 255 (vpmaddubsw would saturate at 64770) and
// of 0 (the signed shift makes those -128: |a'| = 128 with a negative weight), mixed in one row.
TEST(Int8Gemm, EightBitWeightsAreExactAtTheExtremes) {
  const int64_t M = 9, N = 35, K = 261;
  std::vector<int8_t> q(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k)
      q[static_cast<size_t>(n * K + k)] = n % 3 == 0 ? 127 : n % 3 == 1 ? -127 : (k % 2 ? 127 : -127);
  }
  const std::vector<float> scale(static_cast<size_t>(N), 1.0f);
  EXPECT_THROW(Int8Matrix::from_quantized(q.data(), scale.data(), N, K), Error);  // not 7-bit
  const Int8Matrix w = Int8Matrix::from_quantized(q.data(), scale.data(), N, K, 8);
  EXPECT_EQ(w.weight_max(), 127);
  // Rows: all 255; all 0 (values equal the row's minimum); alternating extremes.
  std::vector<float> A(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k)
      A[static_cast<size_t>(m * K + k)] = m % 3 == 0 ? 7.0f : m % 3 == 1 ? -7.0f : (k % 2 ? 5.0f : -5.0f);
  }
  std::vector<int32_t> acc(static_cast<size_t>(M * N)), want(static_cast<size_t>(M * N));
  std::vector<RowQuantization> rows(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    std::vector<uint8_t> qa(static_cast<size_t>(K));
    quantize_row(A.data() + m * K, K, qa.data());
    for (int64_t n = 0; n < N; ++n) {
      int64_t sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += int64_t{qa[k]} * q[static_cast<size_t>(n * K + k)];
      want[static_cast<size_t>(m * N + n)] = static_cast<int32_t>(sum);
    }
  }
  EXPECT_EQ(want[0], 255 * 127 * K);
  for (Isa path : kPaths) {
    accumulators_at(path, A.data(), M, K, K, w, acc.data(), rows.data());
    ASSERT_EQ(acc, want) << isa_name(path);
  }
}

TEST(Int8Gemm, EightBitWeightsRangeAndSchemeDefinition) {
  // max |w| = 127: scale exactly 1; halves round to even.
  const std::vector<float> W = {127.0f, 0.5f, 1.5f, -2.5f};
  std::vector<int8_t> q(4);
  std::vector<float> s(1);
  ASSERT_EQ(quantize_weight(W.data(), 1, 4, q.data(), s.data(), 8), -1);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(int8_weight_max(7), 63);
  EXPECT_EQ(int8_weight_max(8), 127);
  EXPECT_THROW(int8_weight_max(6), Error);
  // -128 is never a weight (the scheme is symmetric; the AVX2 form needs |w| <= 127).
  std::vector<int8_t> bad = {1, 2, 3, -128};
  const std::vector<float> ones = {1.0f, 1.0f};
  EXPECT_THROW(Int8Matrix::from_quantized(bad.data(), ones.data(), 2, 2, 8), Error);
  bad[3] = -127;
  EXPECT_NO_THROW(Int8Matrix::from_quantized(bad.data(), ones.data(), 2, 2, 8));
}

std::vector<float> float_linear(const std::vector<float>& A, int64_t M, int64_t K, const Weight& w, int64_t N,
                                const std::vector<float>& bias) {
  std::vector<float> C(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = bias[n];
      for (int64_t k = 0; k < K; ++k) {
        s += static_cast<double>(A[static_cast<size_t>(m * K + k)]) * w.q[static_cast<size_t>(n * K + k)] * w.scale[n];
      }
      C[static_cast<size_t>(m * N + n)] = static_cast<float>(s);
    }
  }
  return C;
}

TEST(Int8Gemm, EpiloguesMatchThePlainPathAndTheFloatResult) {
  for (int bits : {7, 8}) {
    const int64_t M = 37, N = 70, K = 200;
    const Weight w = make_weight(N, K, 7, bits);
    const std::vector<float> A = random_floats(M * K, 8);
    const std::vector<float> bias = random_floats(N, 9, 0.1f);
    const std::vector<float> exact = float_linear(A, M, K, w, N, bias);
    float amax = 0.0f;
    for (float v : exact) amax = std::max(amax, std::fabs(v));
    for (Epilogue e : {Epilogue::Store, Epilogue::Accumulate, Epilogue::Gelu, Epilogue::GeluTanh}) {
      const std::vector<float> start = random_floats(M * N, 10);
      std::vector<float> fast = start, avx2 = start, plain = start;
      linear_int8_at(Isa::Avx512Vnni, A.data(), M, K, K, w.packed, bias.data(), fast.data(), N, e);
      linear_int8_at(Isa::Avx2, A.data(), M, K, K, w.packed, bias.data(), avx2.data(), N, e);
      linear_int8_at(Isa::Scalar, A.data(), M, K, K, w.packed, bias.data(), plain.data(), N, e);
      for (size_t i = 0; i < fast.size(); ++i) {
        ASSERT_NEAR(fast[i], plain[i], 1e-5f * (1.0f + std::fabs(plain[i])))
            << activation_name(e.act) << " beta " << e.beta << " at " << i;
        ASSERT_EQ(fast[i], avx2[i]) << i;  // same integers, same epilogue code
      }
      if (e == Epilogue::Store) {  // activation quantization error only: small against the output's range
        for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], exact[i], 0.02f * amax) << i;
      }
      if (e == Epilogue::Accumulate) {
        std::vector<float> stored = start;
        linear_int8_at(Isa::Avx512Vnni, A.data(), M, K, K, w.packed, bias.data(), stored.data(), N, Epilogue::Store);
        for (size_t i = 0; i < fast.size(); ++i)
          ASSERT_NEAR(fast[i], start[i] + stored[i], 1e-5f * (1 + std::fabs(fast[i])));
      }
    }
  }
}

TEST(Int8Gemm, ANonFiniteRowGivesNaNInThatRowOnly) {
  const int64_t M = 6, N = 20, K = 33;
  const Weight w = make_weight(N, K, 3);
  std::vector<float> A = random_floats(M * K, 4);
  A[static_cast<size_t>(1 * K + 5)] = std::numeric_limits<float>::quiet_NaN();
  A[static_cast<size_t>(4 * K + 32)] = std::numeric_limits<float>::infinity();
  for (Isa path : kPaths) {
    std::vector<float> C(static_cast<size_t>(M * N), 0.0f);
    linear_int8_at(path, A.data(), M, K, K, w.packed, nullptr, C.data(), N, Epilogue::Gelu);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_EQ(std::isnan(C[static_cast<size_t>(m * N + n)]), m == 1 || m == 4) << m << "," << n;
      }
    }
  }
}

TEST(Int8Gemm, RefusesWeightsThatCouldSaturateAndBadScales) {
  std::vector<int8_t> q = {1, 2, 3, 64};
  std::vector<float> s = {1.0f, 1.0f};
  EXPECT_THROW(Int8Matrix::from_quantized(q.data(), s.data(), 2, 2), Error);
  q[3] = -128;
  EXPECT_THROW(Int8Matrix::from_quantized(q.data(), s.data(), 2, 2), Error);
  q[3] = -63;
  EXPECT_NO_THROW(Int8Matrix::from_quantized(q.data(), s.data(), 2, 2));
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    s[1] = bad;
    EXPECT_THROW(Int8Matrix::from_quantized(q.data(), s.data(), 2, 2), Error) << bad;
  }
  // Operands that do not fit.
  s[1] = 1.0f;
  const Int8Matrix w = Int8Matrix::from_quantized(q.data(), s.data(), 2, 2);
  std::vector<float> A(6), C(6);
  EXPECT_THROW(linear_int8(A.data(), 2, 3, 3, w, nullptr, C.data(), 2, Epilogue::Store), Error);
  // Epilogues the int8 store does not implement: alpha, another beta, an activation on a residual.
  EXPECT_THROW(linear_int8(A.data(), 2, 2, 2, w, nullptr, C.data(), 2, Epilogue{0.5f, 0.0f, Activation::None}), Error);
  EXPECT_THROW(linear_int8(A.data(), 2, 2, 2, w, nullptr, C.data(), 2, Epilogue{1.0f, 0.5f, Activation::None}), Error);
  EXPECT_THROW(linear_int8(A.data(), 2, 2, 2, w, nullptr, C.data(), 2, Epilogue{1.0f, 1.0f, Activation::Gelu}), Error);
}

}  // namespace
}  // namespace vit::kernels
