// bfloat16 Linear (kernels/gemm/bf16_gemm.h): conversion rounds to nearest even, and every path (the
// AVX512_BF16 micro-kernel where the CPU has it, the AVX2 float32 one forced below Avx512, the plain
// C++ one forced to Scalar) equals the double reference on the same bf16 inputs, on awkward sizes
// and every epilogue.
#include "kernels/gemm/bf16_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu_features.h"

namespace vit::kernels {
namespace {

float float_of(uint32_t b) {
  float x = 0;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

TEST(Bf16, ConversionRoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(float_of(0x3F808000)), 0x3F80);  // a tie: to the even one below
  EXPECT_EQ(to_bf16(float_of(0x3F818000)), 0x3F82);  // a tie: to the even one above
  EXPECT_EQ(to_bf16(float_of(0x3F808001)), 0x3F81);  // above the tie: up
  EXPECT_EQ(to_bf16(-2.5f), 0xC020);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(to_bf16(float_of(0x7F7FFFFF)), 0x7F80);  // the largest float rounds to infinity
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  EXPECT_EQ(from_bf16(0x4049), float_of(0x40490000));
  for (float x : {0.1f, -3.3f, 1e-20f, 65504.0f}) {
    EXPECT_LE(std::fabs(from_bf16(to_bf16(x)) - x), std::fabs(x) / 256) << x;  // 8 bits of mantissa
  }
}

void check(int64_t M, int64_t N, int64_t K, const Epilogue& e, bool with_bias) {
  std::mt19937 gen(static_cast<uint32_t>(M * 1000 + N * 10 + K));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(M * (K + 3))), w(static_cast<size_t>(N * K)), bias(static_cast<size_t>(N));
  for (auto& v : x) v = normal(gen);
  for (auto& v : w) v = normal(gen);
  for (auto& v : bias) v = normal(gen);
  const Bf16Matrix packed = Bf16Matrix::from_weight(w.data(), N, K);
  const int64_t lda = K + 3, ldy = N + 2;
  std::vector<float> base(static_cast<size_t>(M * ldy));
  for (auto& v : base) v = normal(gen);  // the residual read with beta = 1
  std::vector<float> expected = base;
  linear_bf16_ref(x.data(), M, K, lda, packed, with_bias ? bias.data() : nullptr, expected.data(), ldy, e);
  for (Isa limit : {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar}) {
    ScopedIsaLimit cap(limit);
    std::vector<float> y = base;
    linear_bf16(x.data(), M, K, lda, packed, with_bias ? bias.data() : nullptr, y.data(), ldy, e);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < ldy; ++n) {
        const float got = y[m * ldy + n], want = expected[m * ldy + n];
        if (n >= N) {
          ASSERT_EQ(got, base[m * ldy + n]) << "wrote past N at " << m << "," << n;
          continue;
        }
        // float32 accumulation of exact bf16 products: within K ulps of the sum of magnitudes.
        double scale = 1.0;
        for (int64_t k = 0; k < K; ++k) scale += std::fabs(x[m * lda + k] * w[n * K + k]);
        ASSERT_NEAR(got, want, 2e-7 * scale * static_cast<double>(K + 4))
            << "M " << M << " N " << N << " K " << K << " at " << m << "," << n << " (" << isa_name(limit) << ", "
            << bf16_gemm_path() << ")";
      }
    }
  }
}

TEST(Bf16, LinearEqualsTheReferenceOnEveryPath) {
  for (int64_t M : {1, 3, 8, 9, 33}) {
    for (int64_t N : {1, 15, 16, 17, 33, 48, 64}) {
      for (int64_t K : {1, 2, 3, 31, 64, 65}) check(M, N, K, Epilogue::Store, true);
    }
  }
  check(7, 40, 96, Epilogue::Accumulate, true);
  check(7, 40, 96, Epilogue::Gelu, true);
  check(7, 40, 96, Epilogue::GeluTanh, false);
  check(197, 192, 192, Epilogue::Store, true);  // a ViT-Ti layer's shape, threaded
  // K across the 256-deep blocks (partial sums kept in y), M across the 200-row blocks, residuals
  // and GELU applied after the last block, and an alpha that runs K whole.
  check(9, 40, 600, Epilogue::Store, true);
  check(450, 70, 520, Epilogue::Accumulate, true);
  check(203, 33, 257, Epilogue::Gelu, true);
  check(17, 48, 300, Epilogue{0.5f, -0.25f, Activation::None}, true);
  // The AVX2 path's wide blocks (10 panels: A packed, K in three blocks of 700), GELU in registers.
  check(31, 160, 2100, Epilogue::Gelu, true);
}

TEST(Bf16, ActivationsAreRoundedToNearestEvenOnEveryPath) {
  // An identity weight: y[n] = bf16(x[n]) exactly (products by 1, sums with zeros).
  const int64_t K = 37;
  std::vector<float> w(static_cast<size_t>(K * K), 0.0f), x(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) w[k * K + k] = 1.0f;
  const uint32_t bits[] = {0x3F808000, 0x3F818000, 0x3F808001, 0xBF7FFFFF, 0x7F7F0000, 0x00800000, 0x3F800000};
  for (int64_t k = 0; k < K; ++k) x[k] = k < 7 ? float_of(bits[k]) : 0.37f * static_cast<float>(k - 20);
  const Bf16Matrix packed = Bf16Matrix::from_weight(w.data(), K, K);
  for (Isa limit : {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar}) {
    ScopedIsaLimit cap(limit);
    std::vector<float> y(static_cast<size_t>(K), -1.0f);
    linear_bf16(x.data(), 1, K, K, packed, nullptr, y.data(), K, Epilogue::Store);
    for (int64_t k = 0; k < K; ++k) EXPECT_EQ(y[k], from_bf16(to_bf16(x[k]))) << k << " " << isa_name(limit);
    x[3] = std::numeric_limits<float>::quiet_NaN();  // a NaN input makes its row NaN
    linear_bf16(x.data(), 1, K, K, packed, nullptr, y.data(), K, Epilogue::Store);
    EXPECT_TRUE(std::isnan(y[3])) << isa_name(limit);
    x[3] = float_of(bits[3]);
  }
}

// The first finite float that rounds to bfloat16 infinity is 0x7F7F8000 (3.3962e38: the largest
// bfloat16, 0x7F7F, plus half a step, a tie that goes to the even 0x7F80); infinity itself and NaN
// are no overflow.
TEST(Bf16, OverflowIndexFindsTheFirstFiniteValueThatRoundsToInfinity) {
  const std::vector<float> fine = {float_of(0x7F7F7FFF), float_of(0xFF7F7FFF), float_of(0x7F800000),
                                   float_of(0x7FC00000), 1.0f};
  EXPECT_EQ(bf16_overflow_index(fine.data(), static_cast<int64_t>(fine.size())), -1);
  for (const uint32_t bits : {0x7F7F8000u, 0xFF7F8000u, 0x7F7FFFFFu}) {
    const std::vector<float> v = {1.0f, float_of(bits), float_of(0x7F7F8000)};
    EXPECT_EQ(bf16_overflow_index(v.data(), 3), 1) << std::hex << bits;
    EXPECT_TRUE(std::isinf(from_bf16(to_bf16(v[1])))) << std::hex << bits;
  }
  EXPECT_FALSE(std::isinf(from_bf16(to_bf16(float_of(0x7F7F7FFF)))));
}

TEST(Bf16, WeightsRoundTripThroughThePacking) {
  std::vector<float> w(5 * 7);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.37f * static_cast<float>(i) - 3.0f;
  const Bf16Matrix m = Bf16Matrix::from_weight(w.data(), 5, 7);
  EXPECT_EQ(m.rows(), 5);
  EXPECT_EQ(m.cols(), 7);
  for (int64_t n = 0; n < 5; ++n) {
    for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(m.at(n, k), from_bf16(to_bf16(w[n * 7 + k]))) << n << "," << k;
  }
  // Special values and K past one 16-float step, on the vectorised and the plain conversion: the
  // same bits as to_bf16 (denormals kept, ties to even, NaN quiet).
  const uint32_t special[] = {0x00000001, 0x807FFFFF, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x7FC00001, 0xFF800000};
  std::vector<float> v(3 * 21);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i < 7 ? float_of(special[i]) : 0.001f * static_cast<float>(i * i) - 1.0f;
  for (Isa limit : {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar}) {
    ScopedIsaLimit cap(limit);
    const Bf16Matrix b = Bf16Matrix::from_weight(v.data(), 3, 21);
    for (int64_t n = 0; n < 3; ++n) {
      for (int64_t k = 0; k < 21; ++k) {
        const float want = from_bf16(to_bf16(v[n * 21 + k])), got = b.at(n, k);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << n << "," << k;
        } else {
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << n << "," << k << " " << isa_name(limit);
        }
      }
    }
  }
}

}  // namespace
}  // namespace vit::kernels
