// bfloat16 training GEMMs (kernels/gemm/bf16_train_gemm.h): every transpose combination, strided
// operands, alpha / beta, on awkward sizes (the transposes' 16 x 16 tiles cut, a 1024-row K) and on
// both paths (AVX512_BF16 where the CPU has it, the plain C++ one forced below Avx512), against the
// double reference on the same bf16-rounded inputs; and the Linear forward against linear_bf16_ref.
#include "kernels/gemm/bf16_train_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu_features.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::kernels {
namespace {

float rounded(float x) { return from_bf16(to_bf16(x)); }

struct Case {
  bool trans_a, trans_b;
  int64_t M, N, K;
  float alpha, beta;
};

void check(const Case& c) {
  const auto [ta, tb, M, N, K, alpha, beta] = c;
  std::mt19937 gen(static_cast<uint32_t>(M * 7919 + N * 31 + K));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Operands with row strides wider than they need (3 extra columns), C with 2.
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 3, ldc = N + 2;
  std::vector<float> A(static_cast<size_t>((ta ? K : M) * lda)), B(static_cast<size_t>((tb ? N : K) * ldb));
  for (auto& v : A) v = normal(gen);
  for (auto& v : B) v = normal(gen);
  std::vector<float> base(static_cast<size_t>(M * ldc));
  for (auto& v : base) v = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : normal(gen);  // beta 0: unread
  std::vector<float> want = base;
  gemm_bf16_ref(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, want.data(), ldc);
  auto a_at = [&](int64_t m, int64_t k) { return ta ? A[k * lda + m] : A[m * lda + k]; };
  auto b_at = [&](int64_t k, int64_t n) { return tb ? B[n * ldb + k] : B[k * ldb + n]; };
  for (Isa limit : {Isa::Avx512Vnni, Isa::Avx2, Isa::Scalar}) {
    ScopedIsaLimit cap(limit);
    std::vector<float> got = base;
    gemm_bf16(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, got.data(), ldc);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < ldc; ++n) {
        const float g = got[m * ldc + n];
        if (n >= N) {  // past N: untouched
          ASSERT_TRUE(std::isnan(g) ? std::isnan(base[m * ldc + n]) : g == base[m * ldc + n]) << m << "," << n;
          continue;
        }
        // float32 sums of exact bf16 products: within K ulps of the sum of magnitudes.
        double scale = 1.0;
        for (int64_t k = 0; k < K; ++k) scale += std::fabs(rounded(a_at(m, k)) * rounded(b_at(k, n)));
        if (beta != 0.0f) scale += std::fabs(base[m * ldc + n]);
        ASSERT_NEAR(g, want[m * ldc + n], 2e-7 * scale * static_cast<double>(K + 4))
            << "trans " << ta << tb << " M " << M << " N " << N << " K " << K << " alpha " << alpha << " beta " << beta
            << " at " << m << "," << n << " (" << isa_name(limit) << ", " << bf16_gemm_path() << ")";
      }
    }
  }
}

TEST(Bf16TrainGemm, EqualsTheReferenceForEveryTransposeOnEveryPath) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int64_t M : {1, 3, 17, 33}) {
        for (int64_t N : {1, 7, 16, 31, 65}) {
          for (int64_t K : {1, 2, 15, 33}) check({ta, tb, M, N, K, 1.0f, 0.0f});
        }
      }
      check({ta, tb, 9, 20, 40, 1.0f, 1.0f});     // accumulate: dX and dW's += into .grad
      check({ta, tb, 9, 20, 40, -0.5f, 0.25f});   // any alpha and beta
      check({ta, tb, 64, 48, 1024, 1.0f, 1.0f});  // K = 1024 rows (4 KB strides in the transposes)
    }
  }
}

TEST(Bf16TrainGemm, EmptySizes) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  gemm_bf16(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);  // K = 0: C = beta C
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  gemm_bf16(true, true, 0, 0, 5, 1.0f, nullptr, 1, nullptr, 5, 0.0f, C.data(), 1);  // nothing to do
  EXPECT_EQ(C[0], 0.5f);
  EXPECT_THROW(gemm_bf16(false, false, 2, 2, 3, 1.0f, C.data(), 2, C.data(), 2, 0.0f, C.data(), 2), Error);  // lda < K
}

TEST(Bf16TrainGemm, LinearForwardEqualsTheInferenceReference) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t M = 37, N = 50, K = 70, lda = 73, ldy = 52;
  std::vector<float> x(static_cast<size_t>(M * lda)), w(static_cast<size_t>(N * K)), bias(static_cast<size_t>(N));
  for (auto& v : x) v = normal(gen);
  for (auto& v : w) v = normal(gen);
  for (auto& v : bias) v = normal(gen);
  std::vector<float> want(static_cast<size_t>(M * ldy), 0.0f), got = want;
  linear_bf16_ref(x.data(), M, K, lda, Bf16Matrix::from_weight(w.data(), N, K), bias.data(), want.data(), ldy,
                  Epilogue::Store);
  linear_forward_bf16(x.data(), M, K, lda, w.data(), N, bias.data(), got.data(), ldy);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

}  // namespace
}  // namespace vit::kernels
