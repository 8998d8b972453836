// Broadcast binary kernels against naive index loops, each float ISA path forced in turn:
// same-shape (flat, threaded), broadcast operands (stride 0, dims that merge and that do not),
// permuted (non-contiguous) operands, 0-d and empty shapes; bias_add pair.
#include "kernels/binary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/shape.h"
#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;

const std::vector<Binary> kOps = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div};

double apply_naive(Binary op, double a, double b) {
  switch (op) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
    case Binary::Div:
      return a / b;
  }
  return 0;
}

// y[idx] = a[sum idx_d * a_strides_d] op b[...] over every multi-index of shape.
template <typename T>
std::vector<double> naive_binary(Binary op, const Shape& shape, const std::vector<T>& a, const Strides& as,
                                 const std::vector<T>& b, const Strides& bs) {
  const int64_t n = shape_numel(shape);
  std::vector<double> y(n);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rest = flat, ao = 0, bo = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      ao += i * as[d];
      bo += i * bs[d];
    }
    y[flat] = apply_naive(op, a[ao], b[bo]);
  }
  return y;
}

struct Case {
  std::string name;
  Shape shape;
  int64_t a_size;
  Strides a_strides;
  int64_t b_size;
  Strides b_strides;
};

const std::vector<Case> kCases = {
    {"same shape", {2, 3, 4}, 24, {12, 4, 1}, 24, {12, 4, 1}},
    {"same shape, threaded", {200, 201}, 40200, {201, 1}, 40200, {201, 1}},
    {"b (3, 1) broadcast", {2, 3, 4}, 24, {12, 4, 1}, 3, {0, 1, 0}},
    {"b per sample (5, 1, 1) broadcast", {5, 7, 33}, 1155, {231, 33, 1}, 5, {1, 0, 0}},
    {"a per sample, size-1 dim", {3, 1, 17}, 3, {1, 0, 0}, 51, {17, 17, 1}},
    {"b row (4) broadcast", {2, 3, 4}, 24, {12, 4, 1}, 4, {0, 0, 1}},
    {"a scalar broadcast", {5, 7}, 1, {0, 0}, 35, {7, 1}},
    {"both broadcast (outer product)", {7, 33}, 7, {1, 0}, 33, {0, 1}},
    {"a permuted (4, 3, 2) storage", {2, 3, 4}, 24, {1, 2, 6}, 24, {12, 4, 1}},
    {"a transposed, b column", {31, 3}, 93, {1, 31}, 31, {1, 0}},
    {"1-d", {197}, 197, {1}, 197, {1}},
    {"1-d broadcast", {65}, 65, {1}, 1, {0}},
    {"0-d", {}, 1, {}, 1, {}},
};

template <typename T>
class BinaryKernels : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BinaryKernels, Types);

TYPED_TEST(BinaryKernels, BroadcastForwardMatchesNaive) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (const Case& c : kCases) {
      const std::vector<T> a = random_vector<T>(c.a_size, 1 + static_cast<uint64_t>(c.a_size));
      std::vector<T> b = random_vector<T>(c.b_size, 2 + static_cast<uint64_t>(c.b_size), 1.0);
      for (auto& v : b) v = v >= T(0) ? v + T(0.5) : v - T(0.5);  // away from 0 for Div
      for (Binary op : kOps) {
        std::vector<T> y(shape_numel(c.shape), T(-777));
        binary_forward<T>(op, c.shape, a.data(), c.a_strides, b.data(), c.b_strides, y.data());
        EXPECT_TRUE(close(y, naive_binary(op, c.shape, a, c.a_strides, b, c.b_strides), test::tolerance_for<T>(),
                          std::string(binary_name(op)) + " " + c.name));
      }
    }
  }
}

TYPED_TEST(BinaryKernels, EmptyShapeWritesNothing) {
  using T = TypeParam;
  const std::vector<T> a(4, T(1)), b(4, T(2));
  std::vector<T> y(4, T(-777));
  binary_forward<T>(Binary::Add, Shape{2, 0, 3}, a.data(), Strides{0, 3, 1}, b.data(), Strides{0, 0, 1}, y.data());
  binary_forward<T>(Binary::Add, Shape{0}, a.data(), Strides{1}, b.data(), Strides{1}, y.data());
  for (T v : y) EXPECT_EQ(v, T(-777));
}

TYPED_TEST(BinaryKernels, BiasAddForwardAndBackward) {
  using T = TypeParam;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    SCOPED_TRACE(isa_name(active_isa()));
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {197, 65}, {200, 197}}) {
      const std::vector<T> bias = random_vector<T>(n, 3);
      std::vector<T> y = random_vector<T>(rows * n, 4);
      std::vector<double> expected(y.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < n; ++i) expected[r * n + i] = static_cast<double>(y[r * n + i]) + bias[i];
      }
      bias_add_forward<T>(y.data(), bias.data(), rows, n);
      const std::string size = " " + std::to_string(rows) + "x" + std::to_string(n);
      EXPECT_TRUE(close(y, expected, test::tolerance_for<T>(), "bias_add_forward" + size));

      const std::vector<T> dy = random_vector<T>(rows * n, 5);
      std::vector<T> dbias = random_vector<T>(n, 6);  // non-zero: backward accumulates
      std::vector<double> edb(dbias.begin(), dbias.end());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < n; ++i) edb[i] += dy[r * n + i];
      }
      bias_add_backward<T>(dy.data(), dbias.data(), rows, n);
      EXPECT_TRUE(close(dbias, edb, test::tolerance_for<T>(), "bias_add_backward" + size));
    }
  }
}

TEST(BinaryKernels, NamesAreDistinct) {
  EXPECT_STREQ(binary_name(Binary::Add), "add");
  EXPECT_STREQ(binary_name(Binary::Sub), "sub");
  EXPECT_STREQ(binary_name(Binary::Mul), "mul");
  EXPECT_STREQ(binary_name(Binary::Div), "div");
}

}  // namespace
}  // namespace vit::kernels
