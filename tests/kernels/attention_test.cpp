// Fused attention kernels: forward (output and saved probabilities) against attention_forward_ref
// and a naive double loop, with and without a dropout-like mask; backward against
// attention_backward_ref on awkward and ViT-like shapes (the digits model's 16 and 49 tokens
// included; the fashion model's 16 tokens of width 12, and other shapes of the <= 16-token kernel), accumulating into a
// non-zero dqkv, each float ISA path forced in turn; the kernel pair and the reference pair each against central
// differences in double on tiny shapes.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/random.h"
#include "kernel_test_util.h"
#include "kernels/dropout.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

std::string shape_str(const AttentionShape& s, bool masked) {
  return " B=" + std::to_string(s.batch) + " N=" + std::to_string(s.tokens) + " NH=" + std::to_string(s.num_heads) +
         " HD=" + std::to_string(s.head_dim) + (masked ? " masked" : "");
}

// Element (b, i) of head h's q (which = 0), k (1) or v (2) in the packed qkv (B, N, 3, NH, HD).
int64_t qkv_index(const AttentionShape& s, int64_t b, int64_t i, int64_t which, int64_t h, int64_t d) {
  return (((b * s.tokens + i) * 3 + which) * s.num_heads + h) * s.head_dim + d;
}

struct NaiveAttention {
  std::vector<double> probs;  // (B, NH, N, N), before the mask
  std::vector<double> out;    // (B, N, NH, HD)
};

NaiveAttention naive_forward(const AttentionShape& s, const std::vector<double>& qkv, const std::vector<double>* mask,
                             double scale) {
  const int64_t N = s.tokens, NH = s.num_heads, HD = s.head_dim;
  NaiveAttention a{std::vector<double>(s.batch * NH * N * N), std::vector<double>(s.batch * N * NH * HD, 0.0)};
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t i = 0; i < N; ++i) {
        double* p = &a.probs[((b * NH + h) * N + i) * N];
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < HD; ++d) dot += qkv[qkv_index(s, b, i, 0, h, d)] * qkv[qkv_index(s, b, j, 1, h, d)];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j < N; ++j) p[j] /= sum;
        for (int64_t j = 0; j < N; ++j) {
          const double weight = p[j] * (mask ? (*mask)[((b * NH + h) * N + i) * N + j] : 1.0);
          for (int64_t d = 0; d < HD; ++d)
            a.out[((b * N + i) * NH + h) * HD + d] += weight * qkv[qkv_index(s, b, j, 2, h, d)];
        }
      }
    }
  }
  return a;
}

template <typename T>
std::vector<T> dropout_like_mask(const AttentionShape& s, uint64_t seed) {
  std::vector<T> mask(s.batch * s.num_heads * s.tokens * s.tokens);
  Generator gen(seed);
  dropout_mask<T>(mask.data(), static_cast<int64_t>(mask.size()), 0.25, gen);
  return mask;
}

// Tokens N from 1, 3, 7, 31, 33, 65, 197; batch 1 and > 1; several head counts and head dims.
const std::vector<AttentionShape> kShapes = {{2, 7, 3, 5},   {1, 197, 3, 4}, {1, 1, 2, 3},   {3, 33, 2, 8},
                                             {2, 3, 1, 7},   {1, 31, 4, 2},  {2, 65, 2, 16}, {3, 16, 4, 16},
                                             {2, 49, 4, 16}, {3, 16, 4, 12}, {2, 9, 2, 13},  {1, 15, 3, 1}};

template <typename T>
class Attention : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Attention, Types);

TYPED_TEST(Attention, ForwardMatchesReferenceAndNaive) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const AttentionShape& s : kShapes) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
      const std::vector<T> qkv =
          random_vector<T>(s.batch * s.tokens * 3 * s.dim(), 1 + static_cast<uint64_t>(s.tokens));
      const std::vector<T> mask_values = dropout_like_mask<T>(s, 2);
      const std::vector<double> mask_double = to_double(mask_values);
      for (bool masked : {false, true}) {
        const T* mask = masked ? mask_values.data() : nullptr;
        std::vector<T> probs(s.batch * s.num_heads * s.tokens * s.tokens), out(s.batch * s.tokens * s.dim());
        std::vector<T> out_ref(out.size());
        attention_forward<T>(s, qkv.data(), mask, scale, probs.data(), out.data());
        attention_forward_ref<T>(s, qkv.data(), mask, scale, out_ref.data());
        const NaiveAttention naive = naive_forward(s, to_double(qkv), masked ? &mask_double : nullptr, scale);
        const std::string name = shape_str(s, masked);
        const double tol = test::tolerance_for<T>();
        EXPECT_TRUE(close(out, to_double(out_ref), tol, "attention out vs ref" + name));
        EXPECT_TRUE(close(out, naive.out, tol, "attention out vs naive" + name));
        EXPECT_TRUE(close(out_ref, naive.out, tol, "attention_ref out vs naive" + name));
        EXPECT_TRUE(close(probs, naive.probs, tol, "attention probs (saved, unmasked)" + name));
      }
    }
  }
}

TYPED_TEST(Attention, BackwardMatchesReferenceAndAccumulates) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const AttentionShape& s : kShapes) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
      const int64_t qkv_size = s.batch * s.tokens * 3 * s.dim();
      const std::vector<T> qkv = random_vector<T>(qkv_size, 3 + static_cast<uint64_t>(s.tokens));
      const std::vector<T> dout = random_vector<T>(s.batch * s.tokens * s.dim(), 4);
      const std::vector<T> mask_values = dropout_like_mask<T>(s, 5);
      const std::vector<double> mask_double = to_double(mask_values);
      for (bool masked : {false, true}) {
        const T* mask = masked ? mask_values.data() : nullptr;
        std::vector<T> probs(s.batch * s.num_heads * s.tokens * s.tokens), out(s.batch * s.tokens * s.dim());
        attention_forward<T>(s, qkv.data(), mask, scale, probs.data(), out.data());
        std::vector<T> dqkv = random_vector<T>(qkv_size, 6, 0.5);  // non-zero: backward accumulates
        // The reference accumulates in double into a double copy: one rounding, to double.
        std::vector<double> expected = to_double(dqkv);
        attention_backward_ref<double>(s, to_double(qkv).data(), masked ? mask_double.data() : nullptr, scale,
                                       to_double(dout).data(), expected.data());
        attention_backward<T>(s, qkv.data(), probs.data(), mask, scale, dout.data(), dqkv.data());
        EXPECT_TRUE(close(dqkv, expected, test::tolerance_for<T>(), "attention dqkv" + shape_str(s, masked)));
        // The reference in T (its own inputs as T) agrees with itself in double.
        std::vector<T> dqkv_ref = random_vector<T>(qkv_size, 6, 0.5);
        attention_backward_ref<T>(s, qkv.data(), mask, scale, dout.data(), dqkv_ref.data());
        EXPECT_TRUE(
            close(dqkv_ref, expected, test::tolerance_for<T>(), "attention_backward_ref dqkv" + shape_str(s, masked)));
      }
    }
  }
}

// Kernel forward/backward pair in double against central differences of L = sum(c * out).
TEST(AttentionGradient, MatchesFiniteDifferences) {
  for (const AttentionShape& s : {AttentionShape{1, 3, 2, 3}, AttentionShape{2, 4, 2, 3}, AttentionShape{2, 5, 2, 3}}) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    const int64_t qkv_size = s.batch * s.tokens * 3 * s.dim(), out_size = s.batch * s.tokens * s.dim();
    const std::vector<double> qkv = random_vector<double>(qkv_size, 7 + static_cast<uint64_t>(s.tokens));
    const std::vector<double> c = random_vector<double>(out_size, 8);
    const std::vector<double> mask_values = dropout_like_mask<double>(s, 9);
    for (bool masked : {false, true}) {
      const double* mask = masked ? mask_values.data() : nullptr;
      std::vector<double> probs(s.batch * s.num_heads * s.tokens * s.tokens), out(out_size);
      auto loss = [&](const std::vector<double>& v) {
        std::vector<double> p(probs.size()), o(out_size);
        attention_forward<double>(s, v.data(), mask, scale, p.data(), o.data());
        double l = 0;
        for (int64_t i = 0; i < out_size; ++i) l += c[i] * o[i];
        return l;
      };
      const std::vector<double> init = random_vector<double>(qkv_size, 10);
      std::vector<double> dqkv = init;
      attention_forward<double>(s, qkv.data(), mask, scale, probs.data(), out.data());
      attention_backward<double>(s, qkv.data(), probs.data(), mask, scale, c.data(), dqkv.data());
      std::vector<double> numeric = test::numeric_gradient(loss, qkv);
      for (int64_t i = 0; i < qkv_size; ++i) numeric[i] += init[i];
      EXPECT_TRUE(test::gradient_close(dqkv, numeric, "attention dqkv" + shape_str(s, masked)));
    }
  }
}

// The reference pair in double: attention_backward_ref against central differences of
// L = sum(c * attention_forward_ref(qkv)), accumulating into a non-zero dqkv.
TEST(AttentionReferenceGradient, MatchesFiniteDifferences) {
  for (const AttentionShape& s : {AttentionShape{1, 1, 1, 2}, AttentionShape{1, 3, 2, 3}, AttentionShape{2, 4, 2, 3},
                                  AttentionShape{2, 7, 1, 4}}) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    const int64_t qkv_size = s.batch * s.tokens * 3 * s.dim(), out_size = s.batch * s.tokens * s.dim();
    const std::vector<double> qkv = random_vector<double>(qkv_size, 12 + static_cast<uint64_t>(s.tokens));
    const std::vector<double> c = random_vector<double>(out_size, 13);
    const std::vector<double> mask_values = dropout_like_mask<double>(s, 14);
    for (bool masked : {false, true}) {
      const double* mask = masked ? mask_values.data() : nullptr;
      auto loss = [&](const std::vector<double>& v) {
        std::vector<double> o(out_size);
        attention_forward_ref<double>(s, v.data(), mask, scale, o.data());
        double l = 0;
        for (int64_t i = 0; i < out_size; ++i) l += c[i] * o[i];
        return l;
      };
      const std::vector<double> init = random_vector<double>(qkv_size, 15);
      std::vector<double> dqkv = init;
      attention_backward_ref<double>(s, qkv.data(), mask, scale, c.data(), dqkv.data());
      std::vector<double> numeric = test::numeric_gradient(loss, qkv);
      for (int64_t i = 0; i < qkv_size; ++i) numeric[i] += init[i];
      EXPECT_TRUE(test::gradient_close(dqkv, numeric, "attention_backward_ref dqkv" + shape_str(s, masked)));
    }
  }
}

// Probabilities are a distribution per row even for large scores (no overflow).
TYPED_TEST(Attention, LargeScoresGiveFiniteProbabilities) {
  using T = TypeParam;
  const AttentionShape s{1, 7, 2, 4};
  const std::vector<T> qkv = random_vector<T>(s.batch * s.tokens * 3 * s.dim(), 11, 30.0);  // scores ~ 1e3
  std::vector<T> probs(s.num_heads * s.tokens * s.tokens), out(s.tokens * s.dim()), out_ref(out.size());
  attention_forward<T>(s, qkv.data(), nullptr, 0.5, probs.data(), out.data());
  attention_forward_ref<T>(s, qkv.data(), nullptr, 0.5, out_ref.data());
  std::vector<double> sums(s.num_heads * s.tokens, 0.0);
  for (size_t i = 0; i < probs.size(); ++i) {
    ASSERT_TRUE(std::isfinite(probs[i]));
    sums[i / s.tokens] += probs[i];
  }
  EXPECT_TRUE(close(sums, std::vector<double>(sums.size(), 1.0), test::tolerance_for<T>(), "attention prob sums"));
  // In float, scores of ~1e3 carry rounding of ~1e-4 into exp: compare values only in double.
  if constexpr (std::is_same_v<T, double>) {
    EXPECT_TRUE(close(out, to_double(out_ref), test::kDoubleKernelTol, "attention out, large scores"));
  }
}

}  // namespace
}  // namespace vit::kernels
