// Tensors saved for backward and changed in place before it (torch's version counter): the
// storage counts its in-place writes, an op records the count of what its backward reads, and
// backward() refuses to compute gradients at values the forward did not see.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "optim/optimizer.h"

namespace vit {
namespace {

Variable vector(std::vector<float> values, bool requires_grad = true) {
  const auto n = static_cast<int64_t>(values.size());
  return Variable(Tensor::from_data(values, {n}), requires_grad);
}

void expect_refused(const Variable& loss, const std::string& op) {
  try {
    loss.backward();
    FAIL() << "backward ran on a changed saved tensor";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[backward] one of the variables needed for gradient computation has been modified by an "
                           "inplace operation"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(op), std::string::npos) << message;
    EXPECT_NE(message.find("; expected version"), std::string::npos) << message;
  }
}

TEST(SavedVersions, InPlaceWritesCountOnTheStorageSharedByViews) {
  const Tensor t = Tensor::zeros({2, 3});
  const Tensor row = t.select(0, 1);
  const Tensor copy = t.clone();
  const uint64_t start = t.version(), copy_start = copy.version();
  row.copy_(Tensor::ones({3}));
  t.fill_(2.0);
  t.set({0, 0}, 1.0);
  accumulate_into(row, Tensor::ones({3}));
  EXPECT_EQ(t.version(), start + 4);
  EXPECT_EQ(row.version(), start + 4);
  EXPECT_EQ(copy.version(), copy_start);  // a copy is other memory
}

TEST(SavedVersions, ChangingAnOperandThatMulSavedRefusesBackwardAndLeavesGradsAlone) {
  Variable w = vector({2, 3}), x = vector({1, 1});
  Variable loss = sum(w * x);  // d/dw = x, d/dx = w: both saved
  w.data().copy_(Tensor::from_data(std::vector<float>{5, 7}, {2}));
  expect_refused(loss, "mulBackward");
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
}

TEST(SavedVersions, OpsThatSaveNothingOfTheInputStillRun) {
  // add's gradient does not read its operands: changing one is harmless (as in torch).
  Variable w = vector({2, 3}), x = vector({1, 1});
  Variable loss = sum(w + x * 2.0);
  w.data().fill_(9.0);
  loss.backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, 2}));
}

TEST(SavedVersions, AViewSharesTheCountAndAnOutputIsSavedToo) {
  Variable w = vector({1, 2, 3, 4});
  Variable part = w.slice(0, 0, 2);
  Variable loss = sum(part * part);
  w.data().set({3}, 0.0);  // outside the slice, but the same storage: refused, as torch does
  expect_refused(loss, "mulBackward");
  // exp's backward reads its output: changing the output's memory is refused.
  Variable x = vector({0, 1});
  Variable y = exp(x);
  Variable total = sum(y);
  y.detach().data().fill_(0.0);
  expect_refused(total, "expBackward");
}

TEST(SavedVersions, AnOptimiserStepBetweenForwardAndBackwardIsRefused) {
  Variable w = vector({1, 2});
  optim::SGD sgd({{"w", w}}, 0.1, 0.0);
  sum(w * w).backward();
  Variable next = sum(w * w);
  sgd.step();  // updates w in place
  expect_refused(next, "mulBackward");
  // The usual order (forward, backward, step) is untouched.
  sgd.zero_grad();
  Variable again = sum(w * w);
  again.backward();
  sgd.step();
  EXPECT_NEAR(w.data().to_vector()[0], 1 - 0.2 - 0.1 * 2 * 0.8, 1e-6);
}

}  // namespace
}  // namespace vit
