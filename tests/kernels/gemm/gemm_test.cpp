// gemm against gemm_ref, and gemm_ref against hand-computed products: all four transpose
// combinations, alpha/beta (beta 0 ignores NaN in C, alpha 0 NaN in A and B), strided
// sub-matrices, awkward sizes; float on each ISA path (AVX-512: the packed GEMM; below: BLAS).
#include "kernels/gemm/gemm.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

constexpr double kSentinel = 12345.0;  // written into the ld padding of C; must survive

struct GemmCase {
  int64_t M, N, K;
};
// A representative subset of {1, 3, 7, 31, 33, 65, 197}^3 (each size appears in each role).
const std::vector<GemmCase> kCases = {{1, 1, 1},    {3, 7, 31},    {33, 65, 7},  {197, 3, 33},
                                      {7, 197, 65}, {65, 33, 197}, {31, 1, 197}, {1, 197, 3}};

template <typename T>
class Gemm : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Gemm, Types);

// Runs gemm and gemm_ref on the same strided operands and compares the whole C buffer, padding
// included (neither may write outside the M x N window).
template <typename T>
void check_against_ref(bool ta, bool tb, const GemmCase& c, T alpha, T beta, bool nan_in_c, uint64_t seed) {
  const int64_t a_rows = ta ? c.K : c.M, a_cols = ta ? c.M : c.K;
  const int64_t b_rows = tb ? c.N : c.K, b_cols = tb ? c.K : c.N;
  const int64_t lda = a_cols + 3, ldb = b_cols + 2, ldc = c.N + 5;  // non-tight: sub-matrices
  const std::vector<T> A = random_vector<T>(a_rows * lda, seed);
  const std::vector<T> B = random_vector<T>(b_rows * ldb, seed + 1);
  std::vector<T> C = random_vector<T>(c.M * ldc, seed + 2);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < ldc; ++j) C[i * ldc + j] = static_cast<T>(kSentinel);
    if (nan_in_c) {
      for (int64_t j = 0; j < c.N; ++j) C[i * ldc + j] = std::numeric_limits<T>::quiet_NaN();
    }
  }
  std::vector<T> C_ref = C;
  gemm<T>(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  gemm_ref<T>(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C_ref.data(), ldc);
  const std::string name = ::testing::PrintToString(std::make_tuple(ta, tb, c.M, c.N, c.K, alpha, beta, nan_in_c));
  EXPECT_TRUE(close(C, to_double(C_ref), test::tolerance_for<T>(), "gemm C " + name));
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < ldc; ++j) ASSERT_EQ(C[i * ldc + j], static_cast<T>(kSentinel)) << name;
    for (int64_t j = 0; j < c.N; ++j) ASSERT_FALSE(std::isnan(C_ref[i * ldc + j])) << "gemm_ref " << name;
  }
}

TYPED_TEST(Gemm, MatchesReferenceForAllTransposesAndStrides) {
  using T = TypeParam;
  uint64_t seed = 100;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const GemmCase& c : kCases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          check_against_ref<T>(ta, tb, c, T(1), T(0), /*nan_in_c=*/false, seed += 3);
          check_against_ref<T>(ta, tb, c, T(0.75), T(1), false, seed += 3);     // accumulate
          check_against_ref<T>(ta, tb, c, T(-1.5), T(-0.5), false, seed += 3);  // general alpha/beta
        }
      }
    }
  }
}

TYPED_TEST(Gemm, BetaZeroIgnoresNaNAlreadyInC) {
  using T = TypeParam;
  uint64_t seed = 900;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const GemmCase& c : kCases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) check_against_ref<T>(ta, tb, c, T(0.5), T(0), /*nan_in_c=*/true, seed += 3);
      }
    }
  }
}

// A fixed product worked out by hand: guards gemm_ref itself (and its transposes).
TYPED_TEST(Gemm, HandComputedProduct) {
  using T = TypeParam;
  // A (2, 3) = [[1, 2, 3], [4, 5, 6]], B (3, 2) = [[7, 8], [9, 10], [11, 12]]: A B = [[58, 64], [139, 154]].
  const std::vector<T> A = {1, 2, 3, 4, 5, 6}, At = {1, 4, 2, 5, 3, 6};
  const std::vector<T> B = {7, 8, 9, 10, 11, 12}, Bt = {7, 9, 11, 8, 10, 12};
  const std::vector<double> expected = {2 * 58 + 1, 2 * 64 + 1, 2 * 139 + 1, 2 * 154 + 1};  // alpha 2, beta 1, C 1
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const T* a = ta ? At.data() : A.data();
      const T* b = tb ? Bt.data() : B.data();
      const int64_t lda = ta ? 2 : 3, ldb = tb ? 3 : 2;
      std::vector<T> C(4, T(1)), C_ref(4, T(1));
      gemm<T>(ta, tb, 2, 2, 3, T(2), a, lda, b, ldb, T(1), C.data(), 2);
      gemm_ref<T>(ta, tb, 2, 2, 3, T(2), a, lda, b, ldb, T(1), C_ref.data(), 2);
      EXPECT_TRUE(close(C, expected, test::kExactTol, "gemm"));
      EXPECT_TRUE(close(C_ref, expected, test::kExactTol, "gemm_ref"));
    }
  }
}

// alpha 0: C = beta * C, A and B not read (NaN there is ignored, as BLAS does).
TYPED_TEST(Gemm, AlphaZeroReadsNeitherOperand) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    const std::vector<T> A(6, std::numeric_limits<T>::quiet_NaN()), B(12, T(1));
    std::vector<T> C = {1, 2, 3, 4, 5, 6, 7, 8};
    gemm<T>(false, false, 2, 4, 3, T(0), A.data(), 3, B.data(), 4, T(2), C.data(), 4);
    EXPECT_TRUE(close(C, {2, 4, 6, 8, 10, 12, 14, 16}, test::kExactTol, "gemm alpha=0 beta=2"))
        << isa_name(active_isa());
  }
}

// alpha 0 must not read A or B at all, whichever BLAS kernel the CPU gets (OpenBLAS 0.3.21's
// Cooper Lake and Skylake-X small-matrix kernels read and multiply them): operands on a page that
// cannot be read fault on any read.
TYPED_TEST(Gemm, AlphaZeroTouchesNoOperandPage) {
  using T = TypeParam;
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, static_cast<size_t>(page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  const T* guarded = static_cast<const T*>(mem);
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    std::vector<T> C = {1, 2, 3, 4, 5, 6, 7, 8};
    gemm<T>(false, true, 2, 4, 3, T(0), guarded, 3, guarded, 3, T(-1), C.data(), 4);
    EXPECT_TRUE(close(C, {-1, -2, -3, -4, -5, -6, -7, -8}, test::kExactTol, "alpha=0 beta=-1"))
        << isa_name(active_isa());
  }
  munmap(mem, static_cast<size_t>(page));
}

// K = 0: the product is empty, so C = beta * C (and beta 0 still clears NaN).
TYPED_TEST(Gemm, EmptyInnerDimensionScalesC) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    const std::vector<T> A(3, T(1)), B(4, T(1));
    std::vector<T> C = {1, 2, 3, 4, 5, 6}, C_ref = C;
    gemm<T>(false, false, 2, 3, 0, T(1), A.data(), 1, B.data(), 3, T(2), C.data(), 3);
    gemm_ref<T>(false, false, 2, 3, 0, T(1), A.data(), 1, B.data(), 3, T(2), C_ref.data(), 3);
    EXPECT_TRUE(close(C, {2, 4, 6, 8, 10, 12}, test::kExactTol, "gemm K=0 beta=2"));
    EXPECT_TRUE(close(C_ref, {2, 4, 6, 8, 10, 12}, test::kExactTol, "gemm_ref K=0 beta=2"));
    std::vector<T> N(6, std::numeric_limits<T>::quiet_NaN());
    gemm<T>(false, false, 2, 3, 0, T(1), A.data(), 1, B.data(), 3, T(0), N.data(), 3);
    EXPECT_TRUE(close(N, std::vector<double>(6, 0.0), test::kExactTol, "gemm K=0 beta=0 over NaN"));
  }
}

TEST(Gemm, NegativeSizesThrow) {
  std::vector<float> A(4), B(4), C(4);
  EXPECT_THROW(gemm<float>(false, false, -1, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2), Error);
  EXPECT_THROW(gemm<float>(false, false, 2, 2, -2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2), Error);
}

}  // namespace
}  // namespace vit::kernels
