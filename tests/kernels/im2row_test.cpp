// im2row against naive convolution indexing; row2im as its adjoint
// (<im2row(x), r> == <x, row2im(r)>) and against a naive scatter, with overlapping windows
// (stride < kernel), padding, patch-embedding shapes, and sizes that take the threaded paths.
#include "kernels/im2row.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/gemm/gemm.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;
using test::to_double;

const std::vector<ConvShape> kShapes = {
    {2, 3, 5, 7, 3, 2, 1, 1},    // overlapping windows, padding, non-square kernel
    {1, 2, 8, 8, 4, 4, 4, 0},    // patch embedding: kernel == stride
    {2, 1, 6, 5, 3, 3, 2, 2},    // stride 2 < kernel 3, padding 2
    {1, 1, 1, 1, 1, 1, 1, 0},    // 1x1
    {3, 2, 7, 9, 5, 3, 3, 1},    // stride 3, odd sizes
    {2, 3, 32, 32, 3, 3, 1, 1},  // large enough for the threaded paths (> 1 << 15 elements)
    {2, 3, 14, 21, 7, 7, 7, 0},  // 7x7 patches (the fixed-width copy of the 28x28 presets)
    {1, 2, 9, 10, 7, 7, 2, 3},   // 7x7, overlapping, padded: runs cut at both image edges
};

std::string shape_str(const ConvShape& s) {
  return " B=" + std::to_string(s.batch) + " C=" + std::to_string(s.channels) + " H=" + std::to_string(s.height) +
         " W=" + std::to_string(s.width) + " k=" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
         " stride=" + std::to_string(s.stride) + " pad=" + std::to_string(s.padding);
}

int64_t rows_size(const ConvShape& s) { return s.batch * s.out_h() * s.out_w() * s.row_length(); }
int64_t image_size(const ConvShape& s) { return s.batch * s.channels * s.height * s.width; }

// Calls fn(row_element, image_element_or_-1) for every element of every row, by the textbook
// indexing of a convolution's receptive field.
template <typename Fn>
void for_each_receptive_element(const ConvShape& s, Fn&& fn) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        for (int64_t c = 0; c < s.channels; ++c) {
          for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
            for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
              const int64_t row = (b * OH + oh) * OW + ow;
              const int64_t col = (c * s.kernel_h + kh) * s.kernel_w + kw;
              const int64_t ih = oh * s.stride - s.padding + kh, iw = ow * s.stride - s.padding + kw;
              const bool inside = ih >= 0 && ih < s.height && iw >= 0 && iw < s.width;
              fn(row * s.row_length() + col, inside ? ((b * s.channels + c) * s.height + ih) * s.width + iw : -1);
            }
          }
        }
      }
    }
  }
}

template <typename T>
class Im2Row : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Im2Row, Types);

TYPED_TEST(Im2Row, MatchesNaiveIndexing) {
  using T = TypeParam;
  for (const ConvShape& s : kShapes) {
    const std::vector<T> x = random_vector<T>(image_size(s), 1 + static_cast<uint64_t>(image_size(s)));
    std::vector<T> rows(rows_size(s), T(-777));  // every element must be written
    im2row<T>(s, x.data(), rows.data());
    std::vector<double> expected(rows.size());
    for_each_receptive_element(s, [&](int64_t r, int64_t i) { expected[r] = i >= 0 ? x[i] : 0.0; });
    EXPECT_TRUE(close(rows, expected, test::kExactTol, "im2row" + shape_str(s)));
  }
}

TYPED_TEST(Im2Row, Row2ImMatchesNaiveScatterAndAccumulates) {
  using T = TypeParam;
  for (const ConvShape& s : kShapes) {
    const std::vector<T> r = random_vector<T>(rows_size(s), 2 + static_cast<uint64_t>(rows_size(s)));
    std::vector<T> dx = random_vector<T>(image_size(s), 3, 0.5);  // non-zero: row2im accumulates
    std::vector<double> expected = to_double(dx);
    for_each_receptive_element(s, [&](int64_t row, int64_t i) {
      if (i >= 0) expected[i] += r[row];
    });
    row2im<T>(s, r.data(), dx.data());
    EXPECT_TRUE(close(dx, expected, test::tolerance_for<T>(), "row2im" + shape_str(s)));
  }
}

// <im2row(x), r> == <x, row2im(r)>: row2im is the adjoint (the gradient of im2row).
TEST(Im2RowAdjoint, InnerProductsAgree) {
  for (const ConvShape& s : kShapes) {
    const std::vector<double> x = random_vector<double>(image_size(s), 4);
    const std::vector<double> r = random_vector<double>(rows_size(s), 5);
    std::vector<double> rows(rows_size(s)), back(image_size(s), 0.0);
    im2row<double>(s, x.data(), rows.data());
    row2im<double>(s, r.data(), back.data());
    double lhs = 0, rhs = 0, magnitude = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      lhs += rows[i] * r[i];
      magnitude += std::fabs(rows[i] * r[i]);
    }
    for (size_t i = 0; i < x.size(); ++i) rhs += x[i] * back[i];
    EXPECT_NEAR(lhs, rhs, test::kDoubleKernelTol * magnitude) << shape_str(s);
  }
}

// im2row followed by a GEMM with the weight is the direct convolution (cross-correlation).
TEST(Im2RowConvolution, GemmOfRowsEqualsDirectConvolution) {
  const ConvShape s{2, 3, 6, 7, 3, 2, 2, 1};
  const int64_t OC = 4, OH = s.out_h(), OW = s.out_w(), L = s.row_length();
  const std::vector<double> x = random_vector<double>(image_size(s), 6), w = random_vector<double>(OC * L, 7);
  std::vector<double> rows(rows_size(s)), out(s.batch * OH * OW * OC);
  im2row<double>(s, x.data(), rows.data());
  gemm_ref<double>(false, true, s.batch * OH * OW, OC, L, 1.0, rows.data(), L, w.data(), L, 0.0, out.data(), OC);
  std::vector<double> direct(out.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t o = 0; o < OC; ++o) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < s.channels; ++c) {
            for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t ih = oh * s.stride - s.padding + kh, iw = ow * s.stride - s.padding + kw;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                acc += x[((b * s.channels + c) * s.height + ih) * s.width + iw] *
                       w[((o * s.channels + c) * s.kernel_h + kh) * s.kernel_w + kw];
              }
            }
          }
          direct[((b * OH + oh) * OW + ow) * OC + o] = acc;
        }
      }
    }
  }
  EXPECT_TRUE(close(out, direct, test::kDoubleKernelTol, "conv via im2row"));
}

}  // namespace
}  // namespace vit::kernels
