// The autograd engine: the notebook example, DAG accumulation, no_grad, detach, zero_grad,
// leaf/non-leaf semantics, freed graphs and error messages.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "support/tolerances.h"

namespace vit {
namespace {

Variable scalar(double v, bool requires_grad = true) { return Variable(Tensor::scalar(v), requires_grad); }

TEST(Autograd, NotebookExample) {
  // a=2, b=1, c=a+b, d=b+1, e=c*d; e.backward() gives a.grad=2, b.grad=5.
  Variable a = scalar(2), b = scalar(1);
  Variable c = a + b;
  Variable d = b + 1.0;
  Variable e = c * d;
  EXPECT_EQ(e.item(), 6.0);
  e.backward();
  EXPECT_EQ(a.grad().item(), 2.0);
  EXPECT_EQ(b.grad().item(), 5.0);
  EXPECT_TRUE(a.is_leaf());
  EXPECT_FALSE(e.is_leaf());
  EXPECT_EQ(e.grad_fn(), "mulBackward");
  EXPECT_FALSE(c.grad().defined());  // non-leaf grads are not retained
}

TEST(Autograd, ValueUsedTwiceAccumulates) {
  Variable x = scalar(3);
  Variable y = x * x + x;  // dy/dx = 2x + 1 = 7
  y.backward();
  EXPECT_EQ(x.grad().item(), 7.0);
  // A diamond: z = (x * 2) reused by two branches.
  Variable w = scalar(1.5);
  Variable z = w * 2.0;
  Variable out = z.exp() + z * z;  // d/dw = 2 e^{2w} + 8w
  out.backward();
  EXPECT_NEAR(w.grad().item(), 2 * std::exp(3.0) + 12.0, testing::kFloatLargeValueTol);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCallsUntilZeroed) {
  Variable x = scalar(2);
  (x * 3.0).backward();
  (x * 3.0).backward();
  EXPECT_EQ(x.grad().item(), 6.0);
  x.zero_grad();
  EXPECT_EQ(x.grad().item(), 0.0);
}

TEST(Autograd, NoGradAndDetach) {
  Variable x = scalar(2);
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    Variable y = x * x;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_THROW(y.backward(), Error);
  }
  EXPECT_TRUE(grad_enabled());
  Variable d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.data().shares_storage(x.data()));
  Variable y = x * d;  // gradient flows only through x
  y.backward();
  EXPECT_EQ(x.grad().item(), 2.0);
}

TEST(Autograd, BackwardWithExplicitGradient) {
  Variable x(Tensor::from_data(std::vector<float>{1, 2, 3}, {3}), true);
  Variable y = x * x;
  EXPECT_THROW(y.backward(), Error);  // non-scalar needs grad_output
  y.backward(Tensor::from_data(std::vector<float>{1, 0.5f, 2}, {3}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, 2, 12}));
  EXPECT_THROW(y.backward(Tensor::ones({3})), Error);  // graph already freed
  Variable z = x * 2.0;
  EXPECT_THROW(z.backward(Tensor::ones({4})), Error);  // wrong shape
}

TEST(Autograd, RetainGradKeepsIntermediateGradient) {
  Variable x = scalar(2);
  Variable h = x * 3.0;
  h.retain_grad();
  (h * h).backward();
  EXPECT_EQ(h.grad().item(), 12.0);
  EXPECT_EQ(x.grad().item(), 36.0);
}

TEST(Autograd, DeepChainDoesNotOverflowTheStack) {
  Variable x = scalar(1);
  Variable y = x;
  for (int i = 0; i < 100000; ++i) y = y + 0.0;
  y.backward();
  EXPECT_EQ(x.grad().item(), 1.0);
}

TEST(Autograd, PrintingShowsGradFn) {
  Variable x(Tensor::from_data(std::vector<float>{1, 2}, {2}), true);
  EXPECT_EQ(x.to_string(), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ((x * 2.0).to_string(), "tensor([2., 4.], grad_fn=<mulBackward>)");
}

TEST(Autograd, OpErrorsNameTheOpAndShapes) {
  Variable x(Tensor::zeros({4, 5}));
  Variable w(Tensor::zeros({2, 3}));
  try {
    linear(x, w, Variable());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[linear] input (4, 5): last dim 5 != in_features 3");
  }
  EXPECT_THROW(add(x, Variable(Tensor::zeros({3}))), Error);
  EXPECT_THROW(matmul(x, Variable(Tensor::zeros({4, 2}))), Error);
  EXPECT_THROW(add(x, Variable(Tensor::zeros({4, 5}, DType::F64))), Error);
  EXPECT_THROW(softmax(x, 2), Error);
  EXPECT_THROW(x.sum({0, 0}), Error);
  EXPECT_THROW(layer_norm(x, {4}, Variable(), Variable()), Error);
  EXPECT_THROW(cross_entropy(x, Tensor::from_data(std::vector<int64_t>{0, 1, 2, 5}, {4})), Error);
  EXPECT_THROW(cross_entropy(x, Tensor::from_data(std::vector<int64_t>{0, 1, 2}, {3})), Error);
  EXPECT_THROW(conv2d(x, Variable(Tensor::zeros({1, 1, 2, 2})), Variable()), Error);
  EXPECT_THROW(self_attention(Variable(Tensor::zeros({1, 3, 10})), 2), Error);
  Generator gen(0);
  EXPECT_THROW(dropout(x, 1.5, true, gen), Error);
  EXPECT_THROW(Variable(Tensor::zeros({2}, DType::I64), true), Error);
}

}  // namespace
}  // namespace vit
