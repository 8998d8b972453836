// Mixed-precision GEMMs in the graph (MatmulPrecision::BF16, autograd/ops.h): linear's and conv2d's
// output and every gradient equal float32 on bf16-rounded operands (the forward's x and W, the
// backward's upstream gradient with them) up to summation order, and differ from pure float32
// only at bf16 level; the bias gradient is float32's exactly; float64 refuses bf16.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "core/random.h"
#include "kernels/gemm/bf16_gemm.h"
#include "support/golden.h"

namespace vit {
namespace {

using testing::kBf16MinDifference;
using testing::kBf16VsFloatTol;
using testing::kExact;
using testing::kFloatSameOpTol;

Tensor rounded(const Tensor& t) {
  Tensor r = t.clone();
  float* p = r.data<float>();
  for (int64_t i = 0; i < r.numel(); ++i) p[i] = kernels::from_bf16(kernels::to_bf16(p[i]));
  return r;
}

// max |a - b| / max |b|.
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

struct Grads {
  Tensor y, dx, dw, db;
};

// y = op(x, w, b) and its gradients for the upstream gradient g.
template <class Op>
Grads run(const Op& op, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
  Variable xv(x.clone(), true), wv(w.clone(), true), bv(b.clone(), true);
  Variable y = op(xv, wv, bv);
  y.backward(g);
  return {y.data(), xv.grad(), wv.grad(), bv.grad()};
}

// bf16 against float32 on rounded operands (tight), float32 on the originals (bf16 level), and
// the bias gradient (float32 in both) exactly.
template <class Op>
void check(const Op& op, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
  const auto bf16 = [&](const Variable& xv, const Variable& wv, const Variable& bv) {
    return op(xv, wv, bv, MatmulPrecision::BF16);
  };
  const auto f32 = [&](const Variable& xv, const Variable& wv, const Variable& bv) {
    return op(xv, wv, bv, MatmulPrecision::F32);
  };
  const Grads mixed = run(bf16, x, w, b, g);
  const Grads reference = run(f32, rounded(x), rounded(w), b, rounded(g));
  const Grads pure = run(f32, x, w, b, g);
  EXPECT_CLOSE(mixed.y, reference.y, kFloatSameOpTol);
  EXPECT_CLOSE(mixed.dx, reference.dx, kFloatSameOpTol);
  EXPECT_CLOSE(mixed.dw, reference.dw, kFloatSameOpTol);
  EXPECT_CLOSE(mixed.db, pure.db, kExact);
  for (const auto& [name, got, want] :
       {std::tuple{"y", mixed.y, pure.y}, std::tuple{"dx", mixed.dx, pure.dx}, std::tuple{"dw", mixed.dw, pure.dw}}) {
    EXPECT_TRUE(testing::all_close(got, want, kBf16VsFloatTol, name));
    EXPECT_GT(relative_difference(got, want), kBf16MinDifference) << name << ": bf16 did not run";
  }
}

TEST(Bf16Matmul, LinearIsFloat32OnBf16RoundedOperands) {
  Generator gen(11);
  const Tensor x = Tensor::randn({3, 7, 40}, gen), w = Tensor::randn({33, 40}, gen), b = Tensor::randn({33}, gen);
  const Tensor g = Tensor::randn({3, 7, 33}, gen);
  check([](const Variable& xv, const Variable& wv, const Variable& bv,
           MatmulPrecision p) { return linear(xv, wv, bv, p); },
        x, w, b, g);
}

TEST(Bf16Matmul, Conv2dIsFloat32OnBf16RoundedOperands) {
  Generator gen(12);
  // A patch embedding (stride = kernel) and an overlapping 3x3 convolution with padding.
  for (const auto& [kernel, stride, padding] : {std::tuple{4, 4, 0}, std::tuple{3, 1, 1}}) {
    const Tensor x = Tensor::randn({2, 3, 12, 12}, gen), w = Tensor::randn({17, 3, kernel, kernel}, gen);
    const Tensor b = Tensor::randn({17}, gen);
    const int64_t out = (12 + 2 * padding - kernel) / stride + 1;
    const Tensor g = Tensor::randn({2, 17, out, out}, gen);
    check([&](const Variable& xv, const Variable& wv, const Variable& bv,
              MatmulPrecision p) { return conv2d(xv, wv, bv, stride, padding, p); },
          x, w, b, g);
  }
}

TEST(Bf16Matmul, Float64RefusesBf16) {
  const Variable x(Tensor::ones({2, 3}, DType::F64)), w(Tensor::ones({4, 3}, DType::F64));
  try {
    (void)linear(x, w, Variable(), MatmulPrecision::BF16);
    FAIL() << "float64 ran in bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[linear] bf16 matmul precision takes float32 tensors, got float64"),
              std::string::npos)
        << e.what();
  }
  const Variable image(Tensor::ones({1, 1, 4, 4}, DType::F64)), kernel(Tensor::ones({2, 1, 2, 2}, DType::F64));
  EXPECT_THROW((void)conv2d(image, kernel, Variable(), 2, 0, MatmulPrecision::BF16), Error);
}

}  // namespace
}  // namespace vit
