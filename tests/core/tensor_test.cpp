// Tensor creation, views (PyTorch semantics), copies, printing and errors.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include "support/tolerances.h"

namespace vit {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector(); }

TEST(Tensor, CreationMatchesPyTorch) {
  EXPECT_EQ(values(Tensor::zeros({2, 2})), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(values(Tensor::ones({3})), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(Tensor::full({2}, 2.5)), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(values(Tensor::arange(5)), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(Tensor::arange(1, 2, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  try {  // a count past int64 was once cast to a negative size
    Tensor::arange(0, 1e19);
    FAIL() << "arange(0, 1e19) made a tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("would make 1e+19 elements: too large a size"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Tensor::scalar(3).dim(), 0);
  EXPECT_EQ(Tensor::scalar(3).item(), 3.0);
  Tensor f = Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(f.strides(), (Strides{3, 1}));
  EXPECT_EQ(f.at({1, 2}), 6.0);
  EXPECT_THROW(Tensor::from_data(std::vector<float>{1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, SeededRandomIsReproducibleAndPlausible) {
  Generator a(7), b(7), c(8);
  const Tensor x = Tensor::randn({1000}, a), y = Tensor::randn({1000}, b), z = Tensor::randn({1000}, c);
  EXPECT_EQ(values(x), values(y));
  EXPECT_NE(values(x), values(z));
  double mean = 0, sq = 0;
  for (double v : values(x)) mean += v / 1000, sq += v * v / 1000;
  EXPECT_NEAR(mean, 0.0, testing::kRandnMeanTol);
  EXPECT_NEAR(sq, 1.0, testing::kRandnSecondMomentTol);
  Generator u(1);
  for (double v : values(Tensor::rand({1000}, u))) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
}

TEST(Tensor, UnfoldSeedExample) {
  // arange(16).reshape(4,4).unfold(0,2,2).unfold(1,2,2) flattened -> the four 2x2 patches.
  const Tensor t = Tensor::arange(16).reshape({4, 4}).unfold(0, 2, 2).unfold(1, 2, 2);
  EXPECT_EQ(t.shape(), (Shape{2, 2, 2, 2}));
  const Tensor patches = t.reshape({4, 4});
  EXPECT_EQ(values(patches), (std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}));
  // Overlapping windows (step < size) share storage.
  const Tensor w = Tensor::arange(5).unfold(0, 3, 1);
  EXPECT_EQ(w.shape(), (Shape{3, 3}));
  EXPECT_EQ(values(w), (std::vector<double>{0, 1, 2, 1, 2, 3, 2, 3, 4}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::arange(24).reshape({2, 3, 4});
  Tensor tr = t.transpose(0, 2);
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_TRUE(tr.shares_storage(t));
  EXPECT_EQ(tr.at({3, 2, 1}), t.at({1, 2, 3}));
  Tensor p = t.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(p.at({2, 1, 1}), t.at({1, 2, 1}));
  // Z[:, 0]: select removes the dim.
  Tensor z = t.select(1, 0);
  EXPECT_EQ(z.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(z), (std::vector<double>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(t.select(-1, -1).at({1, 2}), 23.0);
  // Slicing with Python bounds and steps.
  EXPECT_EQ(values(Tensor::arange(10).slice(0, 1, 8, 3)), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(values(Tensor::arange(10).slice(0, -3, 100)), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(Tensor::arange(10).slice(0, 5, 2).numel(), 0);
  // Writing through a view changes the base.
  Tensor base = Tensor::zeros({2, 3});
  base.select(1, 1).fill_(7);
  EXPECT_EQ(values(base), (std::vector<double>{0, 7, 0, 0, 7, 0}));
}

TEST(Tensor, ReshapeFlattenSqueeze) {
  Tensor t = Tensor::arange(24).reshape({2, 3, 4});
  EXPECT_EQ(t.reshape({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(t.flatten().shape(), (Shape{24}));
  EXPECT_EQ(t.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(t.flatten(0, 1).shape(), (Shape{6, 4}));
  // view of a transposed tensor is refused; reshape copies.
  Tensor tr = t.transpose(1, 2);
  EXPECT_THROW(tr.view({2, 12}), Error);
  Tensor r = tr.reshape({2, 12});
  EXPECT_FALSE(r.shares_storage(t));
  EXPECT_EQ(r.at({0, 1}), 4.0);
  // flatten(2) of a (B, C, H, W)-as-permuted layout merges H, W without a copy.
  Tensor cl = Tensor::arange(2 * 3 * 4 * 5).reshape({2, 3, 4, 5}).permute({0, 3, 1, 2});  // (2, 5, 3, 4)
  Tensor fl = cl.flatten(2);
  EXPECT_TRUE(fl.shares_storage(cl));
  EXPECT_EQ(fl.shape(), (Shape{2, 5, 12}));
  Tensor u = t.unsqueeze(0).unsqueeze(-1);
  EXPECT_EQ(u.shape(), (Shape{1, 2, 3, 4, 1}));
  EXPECT_EQ(u.squeeze().shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(u.squeeze(0).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(u.squeeze(1).shape(), u.shape());  // size != 1: no-op as in PyTorch
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
}

TEST(Tensor, ExpandRepeatCatStackIndexSelect) {
  Tensor row = Tensor::arange(3).reshape({1, 3});
  Tensor e = row.expand({2, 3});
  EXPECT_EQ(e.strides(), (Strides{0, 1}));
  EXPECT_EQ(values(e), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(row.expand({2, -1})), values(e));
  EXPECT_THROW(row.expand({2, 4}), Error);
  Tensor r = repeat(Tensor::arange(2).reshape({1, 2}), {2, 3});
  EXPECT_EQ(r.shape(), (Shape{2, 6}));
  EXPECT_EQ(values(r), (std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(repeat(Tensor::arange(2), {2, 1, 2}).shape(), (Shape{2, 1, 4}));
  Tensor a = Tensor::zeros({2, 2}), b = Tensor::ones({2, 1});
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(c), (std::vector<double>{0, 0, 1, 0, 0, 1}));
  EXPECT_THROW(cat({a, b}, 0), Error);
  Tensor s = stack({Tensor::arange(3), Tensor::arange(3)}, 1);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(s), (std::vector<double>{0, 0, 1, 1, 2, 2}));
  Tensor sel = index_select(Tensor::arange(6).reshape({3, 2}), 0, {2, 0, 2});
  EXPECT_EQ(values(sel), (std::vector<double>{4, 5, 0, 1, 4, 5}));
  EXPECT_THROW(index_select(Tensor::arange(6).reshape({3, 2}), 0, {3}), Error);
}

TEST(Tensor, AccumulateIntoOverlappingViewsSums) {
  Tensor g = Tensor::zeros({5});
  accumulate_into(g.unfold(0, 3, 1), Tensor::ones({3, 3}));
  EXPECT_EQ(values(g), (std::vector<double>{1, 2, 3, 2, 1}));
  Tensor h = Tensor::zeros({1, 3});
  accumulate_into(h.expand({4, 3}), Tensor::ones({4, 3}));
  EXPECT_EQ(values(h), (std::vector<double>{4, 4, 4}));
}

TEST(Tensor, DTypesAndConversion) {
  Tensor d = Tensor::arange(3, DType::F64);
  EXPECT_EQ(d.dtype(), DType::F64);
  EXPECT_EQ(d.to(DType::F32).dtype(), DType::F32);
  Tensor i = Tensor::from_data(std::vector<int64_t>{3, -1, 7}, {3});
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.at({2}), 7.0);
  EXPECT_THROW(i.data<float>(), Error);
  EXPECT_THROW(dispatch(DType::I64, []<typename T>() { return 0; }), Error);
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(Tensor::arange(4).reshape({2, 2}).to_string(), "tensor([[0., 1.],\n        [2., 3.]])");
  EXPECT_EQ(Tensor::from_data(std::vector<float>{0.5f, 1.25f}, {2}).to_string(), "tensor([0.5000, 1.2500])");
  EXPECT_EQ(Tensor::from_data(std::vector<float>{1e-5f, 1.0f}, {2}).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(Tensor::scalar(3).to_string(), "tensor(3.)");
  EXPECT_EQ(Tensor::from_data(std::vector<float>{-1.5f, 2.0f}, {2}).to_string(), "tensor([-1.5000,  2.0000])");
  EXPECT_EQ(Tensor::arange(3, DType::F64).to_string(), "tensor([0., 1., 2.], dtype=float64)");
  EXPECT_EQ(Tensor::from_data(std::vector<int64_t>{1, 20}, {2}).to_string(), "tensor([ 1, 20])");
  EXPECT_EQ(Tensor::arange(2000).to_string(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])");
  EXPECT_EQ(Tensor::arange(0, 45, 1.5).to_string(),
            "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
            "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
            "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
            "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])");
  EXPECT_EQ(Tensor::arange(8).reshape({2, 2, 2}).to_string(),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  EXPECT_EQ(Tensor::zeros({0}).to_string(), "tensor([])");
}

TEST(Tensor, BadInputsThrowNamedErrors) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_THROW(t.transpose(0, 2), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
  EXPECT_THROW(t.select(0, 2), Error);
  EXPECT_THROW(t.unfold(1, 4, 1), Error);
  EXPECT_THROW(t.slice(0, 0, 1, 0), Error);
  EXPECT_THROW(t.at({2, 0}), Error);
  EXPECT_THROW(t.item(), Error);
  EXPECT_THROW(Tensor::zeros({-1}), Error);
  EXPECT_THROW(Tensor::zeros({1ll << 40, 1ll << 40}), Error);
  try {
    t.view({4, 2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[view] shape (4, 2) is invalid for input of shape (2, 3) (6 elements)");
  }
}

}  // namespace
}  // namespace vit

namespace vit {
namespace {

// Found by fuzzing the .npy reader: an empty shape whose other dimensions overflow int64
// strides. The element count (0) is fine; the strides are not.
TEST(Tensor, RefusesShapesWhoseStridesOverflow) {
  try {
    Tensor::empty({0, int64_t{1} << 40, int64_t{1} << 40});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("strides of shape (0, 1099511627776, 1099511627776) overflow"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tensor::empty({int64_t{1} << 62, 4}), Error);  // element count overflows
  EXPECT_EQ(Tensor::empty({0, int64_t{1} << 20}).numel(), 0);
}

}  // namespace
}  // namespace vit
