// backward()'s leaf-ready callback: each leaf that needs a gradient is reported exactly once,
// when its .grad already holds its final value (nothing later in the pass adds to it), leaves
// used twice only after their last use, and leaves the pass does not reach not at all.
#include <gtest/gtest.h>

#include <map>

#include "autograd/ops.h"
#include "autograd/variable.h"

namespace vit {
namespace {

TEST(Backward, ReportsEachLeafOnceWithItsFinalGradient) {
  Variable w(Tensor::from_data(std::vector<float>{1, 2, 3, 4}, {2, 2}), true);
  Variable b(Tensor::from_data(std::vector<float>{0.5f, -0.5f}, {2}), true);
  Variable unused(Tensor::from_data(std::vector<float>{1}, {1}), true);
  Variable x(Tensor::from_data(std::vector<float>{1, -1, 2, 0.5f}, {2, 2}));
  // w is used twice (early and late in the graph), b once.
  Variable h = matmul(x, w) + b;
  Variable y = (matmul(h.tanh(), w) * 2.0).sum();
  std::map<const Node*, std::vector<double>> at_report;
  std::vector<const Node*> order;
  y.backward(Tensor::ones(y.shape(), y.dtype()), [&](Node* leaf) {
    order.push_back(leaf);
    at_report[leaf] = Tensor(leaf->grad).clone().to_vector();
  });
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(at_report.count(unused.node().get()), 0u);
  for (const Variable* v : {&w, &b}) {
    ASSERT_EQ(at_report.count(v->node().get()), 1u);
    EXPECT_EQ(at_report[v->node().get()], v->grad().to_vector()) << "reported before its gradient was final";
  }
  // The same gradients as a plain backward.
  Variable w2(w.data().clone(), true), b2(b.data().clone(), true);
  Variable h2 = matmul(x, w2) + b2;
  (matmul(h2.tanh(), w2) * 2.0).sum().backward();
  EXPECT_EQ(w2.grad().to_vector(), w.grad().to_vector());
  EXPECT_EQ(b2.grad().to_vector(), b.grad().to_vector());
}

}  // namespace
}  // namespace vit
