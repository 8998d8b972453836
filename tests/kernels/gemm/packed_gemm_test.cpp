// The packed GEMM (kernels/gemm/packed_gemm.h) against a double reference: sizes around its 6-row
// micro-panels, 16-column panels, 256-deep K blocks and 198-row M blocks; both transposes;
// alpha, beta (0 ignores NaN in C), bias and both GELUs; strided A and C (the padding is never
// written); the threaded and the single-thread split; K = 0; the two ways to pack B; the plain
// micro-kernel (the ISA capped to Scalar) against the AVX2 and AVX-512 ones, bit for bit (B
// packed, and A^T and B read in place; GELU and ReLU in registers included); each level forced on
// awkward sizes, the AVX2 entry's packed, deeper blocks of wide GEMMs included.
#include "kernels/gemm/packed_gemm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/gemm/gemm_test_util.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::random_vector;
using Case = test::GemmCase;

// Runs gemm_packed (single_thread: from inside a parallel region, so it runs on one thread) and
// checks every element of C, padding included.
void check(const Case& c, bool single_thread = false) {
  test::GemmOperands o(c, 0);
  const Epilogue e{c.alpha, c.beta, c.act};
  const float* bias = c.bias ? o.bias.data() : nullptr;
  if (single_thread) {
#pragma omp parallel num_threads(1)
    gemm_packed(c.trans_a, c.trans_b, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, o.C.data(), o.ldc, bias, e);
  } else {
    gemm_packed(c.trans_a, c.trans_b, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, o.C.data(), o.ldc, bias, e);
  }
  test::expect_matches_reference(c, o);
}

TEST(PackedGemm, MatchesReferenceAroundPanelEdges) {
  for (int64_t M : {1, 5, 6, 7, 13}) {
    for (int64_t N : {1, 15, 16, 17, 33}) {
      for (int64_t K : {1, 7, 64}) {
        check({M, N, K});
        check({M, N, K, true, true, 1.0f, 0.0f, false, Activation::None, 3});
      }
    }
  }
}

TEST(PackedGemm, KBlocksAndMBlocks) {
  // K across the 256-deep blocks; M across the 198-row blocks; both threaded splits (many panels:
  // columns split; few panels and many rows: rows split) and the single-thread path.
  for (int64_t K : {255, 256, 257, 513}) check({20, 40, K});
  for (int64_t M : {197, 198, 199, 400}) {
    check({M, 100, 70});
    check({M, 100, 70}, true);
  }
  check({600, 20, 300, false, false, 1.0f, 1.0f});  // rows split, accumulating over K blocks
  check({197, 2304, 300, false, true, 1.0f, 0.0f, true});
}

TEST(PackedGemm, EpiloguesTransposesAndStrides) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float alpha : {1.0f, 0.125f}) {
        for (float beta : {0.0f, 1.0f, -0.5f}) {
          check({23, 37, 300, ta, tb, alpha, beta, true, Activation::None, 2});
        }
      }
    }
  }
  for (Activation act : {Activation::Gelu, Activation::GeluTanh}) {
    for (float beta : {0.0f, 1.0f}) {
      check({50, 65, 290, false, true, 1.0f, beta, true, act, 1});
      check({7, 9, 3, false, true, 1.0f, beta, false, act});
    }
  }
}

TEST(PackedGemm, ZeroDepthAppliesOnlyTheEpilogue) {
  check({5, 18, 0, false, false, 1.0f, 0.0f, true});
  check({5, 18, 0, false, false, 1.0f, 0.5f, true, Activation::Gelu});
  check({0, 4, 3});  // nothing to do
  check({4, 0, 3});
}

TEST(PackedGemm, PackedOnceEqualsPackedPerCall) {
  const int64_t M = 31, N = 45, K = 270;
  const std::vector<float> A = random_vector<float>(M * K, 7), W = random_vector<float>(N * K, 8);
  std::vector<float> Wt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) Wt[k * N + n] = W[n * K + k];
  }
  const PackedMatrix from_weight = PackedMatrix::from_weight(W.data(), N, K);
  const PackedMatrix from_rows = PackedMatrix::from_rows(Wt.data(), K, N, N);
  ASSERT_EQ(from_weight.bytes(), from_rows.bytes());
  EXPECT_EQ(0, std::memcmp(from_weight.data(), from_rows.data(), from_weight.bytes()));
  EXPECT_EQ(from_weight.rows(), K);
  EXPECT_EQ(from_weight.cols(), N);
  EXPECT_EQ(from_weight.panels(), 3);
  std::vector<float> once(static_cast<size_t>(M * N)), per_call(once.size());
  packed_gemm(false, A.data(), K, M, from_weight.data(), K, N, once.data(), N, nullptr, {});
  gemm_packed(false, true, M, N, K, A.data(), K, W.data(), K, per_call.data(), N, nullptr, {});
  EXPECT_EQ(once, per_call);  // the same packed panels through the same loops: bit for bit
}

TEST(PackedGemm, PlainMicroKernelMatchesReferenceAndTheFastOneBitForBit) {
  const ScopedIsaLimit plain(Isa::Scalar);
  EXPECT_FALSE(packed_gemm_supported());
  check({13, 33, 300, false, true, 1.0f, 1.0f, true, Activation::None, 1});
  check({7, 17, 64, true, false, 0.5f, 0.0f, true, Activation::Gelu});
  const int64_t M = 29, N = 50, K = 270;
  const std::vector<float> A = random_vector<float>(M * K, 9), W = random_vector<float>(N * K, 10),
                           bias = random_vector<float>(N, 11);
  const PackedMatrix packed = PackedMatrix::from_weight(W.data(), N, K);
  for (Activation act : {Activation::None, Activation::Gelu, Activation::GeluTanh}) {
    std::vector<float> slow(static_cast<size_t>(M * N)), fast(slow.size());
    packed_gemm(false, A.data(), K, M, packed.data(), K, N, slow.data(), N, bias.data(), {1.0f, 0.0f, act});
    // Every vector micro-kernel (AVX2 6x16, AVX-512 8x32) runs the same FMA chains in the same
    // order: bit for bit.
    for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni}) {
      const ScopedIsaLimit level(isa);
      packed_gemm(false, A.data(), K, M, packed.data(), K, N, fast.data(), N, bias.data(), {1.0f, 0.0f, act});
      EXPECT_EQ(slow, fast) << activation_name(act) << " " << isa_name(active_isa());
    }
  }
  // A^T and a row-major B read in place (dW = dY^T X; the last partial panel of B packed), and
  // B packed per call (many rows of A, a large B): the same chains as the packed panels. (K of the
  // second stays 256: wider blocks of the AVX2 entry pack A and cut K into fewer, deeper blocks,
  // so past 256 they round the partial sums at other places: equal to rounding, not bit for bit.)
  for (const Case& c : {Case{45, 50, 270, true, false}, Case{400, 300, 256, false, false}}) {
    test::GemmOperands o(c, 13);
    std::vector<float> slow = o.C, fast = o.C;
    gemm_packed(c.trans_a, c.trans_b, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, slow.data(), o.ldc, nullptr,
                {});
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      const ScopedIsaLimit level(isa);
      std::vector<float> out = fast;
      gemm_packed(c.trans_a, c.trans_b, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, out.data(), o.ldc, nullptr,
                  {});
      EXPECT_EQ(slow, out) << "M " << c.M << " trans_a " << c.trans_a << " " << isa_name(active_isa());
    }
  }
  // alpha and beta (the AVX-512 kernel applies them in registers on whole tiles): the same roundings.
  for (const Epilogue e : {Epilogue{0.125f, -0.5f, Activation::None}, Epilogue{0.5f, 1.0f, Activation::None}}) {
    std::vector<float> slow = random_vector<float>(M * N, 12), fast = slow;
    packed_gemm(false, A.data(), K, M, packed.data(), K, N, slow.data(), N, bias.data(), e);
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      const ScopedIsaLimit level(isa);
      std::vector<float> out = fast;
      packed_gemm(false, A.data(), K, M, packed.data(), K, N, out.data(), N, bias.data(), e);
      EXPECT_EQ(slow, out) << "alpha " << e.alpha << " beta " << e.beta << " " << isa_name(active_isa());
    }
  }
}

// Every level the CPU has (forced with the cap) against the reference, around each micro-kernel's
// edges: 6 and 8 rows, one and two 16-column panels, an odd panel count, K blocks, M blocks.
TEST(PackedGemm, EveryIsaMatchesTheReferenceOnAwkwardSizes) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > detected_isa()) continue;
    const ScopedIsaLimit level(isa);
    SCOPED_TRACE(packed_gemm_kernel_name());
    for (int64_t M : {1, 7, 8, 9, 11, 12, 13, 25}) {
      for (int64_t N : {16, 31, 32, 33, 48, 80}) check({M, N, 19});
    }
    check({205, 47, 300, false, true, 1.0f, 1.0f, true, Activation::Gelu, 2});
    check({205, 47, 300, true, false, 0.5f, 0.25f, true, Activation::GeluTanh});
    check({37, 200, 520}, true);
    check({37, 200, 520});
    check({300, 40, 33});    // few panels, many rows: the rows split between threads
    check({400, 300, 300});  // a row-major B too large to read in place: packed per call
    check({45, 50, 2100, true, false, 1.0f, 1.0f, false, Activation::None, 3});  // dW = dY^T X, in place
    // Blocks of 8+ panels (the AVX2 entry packs A, K in equal blocks up to 1024 deep) with the
    // activations it applies in registers, and a K cut into three blocks; the threads split them.
    check({205, 200, 300, false, true, 1.0f, 0.0f, true, Activation::Gelu});
    check({31, 160, 2100, false, true, 1.0f, 0.0f, true, Activation::Relu});
    check({31, 160, 2100, true, false, 1.0f, 1.0f, true, Activation::None}, true);
  }
}

TEST(PackedGemm, BadSizesAreRefused) {
  std::vector<float> A(12, 1.0f), C(12, 0.0f);
  EXPECT_THROW(gemm_packed(false, false, 2, 3, 4, A.data(), 3, A.data(), 3, C.data(), 3, nullptr, {}),
               Error);  // lda < K
  EXPECT_THROW(gemm_packed(false, false, 2, 3, 2, A.data(), 2, A.data(), 2, C.data(), 3, nullptr, {}),
               Error);  // ldb < N
  EXPECT_THROW(gemm_packed(false, false, 2, 3, 2, A.data(), 2, A.data(), 3, C.data(), 2, nullptr, {}),
               Error);  // ldc < N
  EXPECT_THROW(PackedMatrix::from_rows(A.data(), 2, 4, 3), Error);
}

}  // namespace
}  // namespace vit::kernels
