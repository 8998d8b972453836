// The direct convolution (kernels/conv/direct_conv.h) against naive double loops, on every ISA path:
// forward with each epilogue (bias, residual, ReLU, NaN kept by the ReLU), the input gradient
// (overwritten and accumulated, strides that leave taps empty) and the weight gradient; shapes with
// channel counts off the 16-column panels, position counts off the tile heights, 1x1 to 7x7
// kernels, strides 1-3, paddings 0-2, and the hybrid preset's own (sizes that take the threaded
// paths).
#include "kernels/conv/direct_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;

struct Case {
  ConvShape s;
  int64_t oc;
};

const std::vector<Case> kCases = {
    {{2, 3, 5, 7, 3, 3, 1, 1}, 5},      // narrow everything, padding
    {{1, 17, 6, 5, 3, 3, 2, 1}, 20},    // stride 2: three of four taps reach no output in the backward
    {{2, 4, 9, 8, 2, 3, 3, 2}, 33},     // non-square kernel, stride 3, padding 2, a 1-column edge panel
    {{3, 16, 4, 4, 1, 1, 1, 0}, 16},    // 1x1
    {{1, 5, 11, 9, 7, 7, 2, 3}, 40},    // 7x7 (49 taps), three panels (an AVX-512 two-panel tile + an edge)
    {{1, 1, 28, 28, 3, 3, 2, 1}, 32},   // the hybrid's stem: one channel, stride 2
    {{4, 32, 14, 14, 3, 3, 1, 1}, 32},  // its first stage (threaded)
    {{2, 32, 14, 14, 3, 3, 2, 1}, 64},  // its downsampling conv
    {{2, 64, 7, 7, 3, 3, 1, 1}, 64},    // its second stage
    {{2, 32, 14, 14, 1, 1, 2, 0}, 64},  // its 1x1 stride-2 shortcut
};

std::string name(const Case& c) {
  const ConvShape& s = c.s;
  return "B=" + std::to_string(s.batch) + " C=" + std::to_string(s.channels) + " " + std::to_string(s.height) + "x" +
         std::to_string(s.width) + " k=" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
         " stride=" + std::to_string(s.stride) + " pad=" + std::to_string(s.padding) + " OC=" + std::to_string(c.oc) +
         " isa=" + isa_name(active_isa());
}

// Index helpers for x (B, H, W, C), y (B, OH, OW, OC), w (OC, KH, KW, C).
struct Ix {
  const ConvShape& s;
  int64_t oc;
  int64_t x(int64_t b, int64_t h, int64_t w, int64_t c) const {
    return ((b * s.height + h) * s.width + w) * s.channels + c;
  }
  int64_t y(int64_t b, int64_t h, int64_t w, int64_t o) const { return ((b * s.out_h() + h) * s.out_w() + w) * oc + o; }
  int64_t w(int64_t o, int64_t kh, int64_t kw, int64_t c) const {
    return ((o * s.kernel_h + kh) * s.kernel_w + kw) * s.channels + c;
  }
};

// Calls f(b, oh, ow, kh, kw, ih, iw) for every in-image (output position, tap) pair.
template <typename F>
void for_each_tap(const ConvShape& s, F f) {
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t oh = 0; oh < s.out_h(); ++oh)
      for (int64_t ow = 0; ow < s.out_w(); ++ow)
        for (int64_t kh = 0; kh < s.kernel_h; ++kh)
          for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const int64_t ih = oh * s.stride - s.padding + kh, iw = ow * s.stride - s.padding + kw;
            if (ih >= 0 && ih < s.height && iw >= 0 && iw < s.width) f(b, oh, ow, kh, kw, ih, iw);
          }
}

int64_t x_size(const ConvShape& s) { return s.batch * s.height * s.width * s.channels; }
int64_t y_size(const Case& c) { return c.s.batch * c.s.out_h() * c.s.out_w() * c.oc; }
int64_t w_size(const Case& c) { return c.oc * c.s.kernel_h * c.s.kernel_w * c.s.channels; }

std::vector<double> reference_forward(const Case& c, const std::vector<float>& x, const std::vector<float>& w) {
  const Ix ix{c.s, c.oc};
  std::vector<double> y(static_cast<size_t>(y_size(c)), 0.0);
  for_each_tap(c.s, [&](int64_t b, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
    for (int64_t o = 0; o < c.oc; ++o)
      for (int64_t ch = 0; ch < c.s.channels; ++ch)
        y[ix.y(b, oh, ow, o)] += double(x[ix.x(b, ih, iw, ch)]) * w[ix.w(o, kh, kw, ch)];
  });
  return y;
}

TEST(DirectConv, ForwardMatchesNaiveLoopsOnEveryIsaPath) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    for (const Case& c : kCases) {
      const auto x = random_vector<float>(x_size(c.s), 1), w = random_vector<float>(w_size(c), 2);
      std::vector<float> y(static_cast<size_t>(y_size(c)), NAN);  // overwritten whatever was there
      conv_nhwc_forward(c.s, c.oc, x.data(), w.data(), y.data());
      EXPECT_TRUE(close(y, reference_forward(c, x, w), test::kFloatKernelTol, "forward " + name(c)));
    }
  }
}

TEST(DirectConv, EpilogueAddsBiasAndResidualThenReluKeepingNan) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    for (const Case& c : kCases) {
      auto x = random_vector<float>(x_size(c.s), 3);
      const auto w = random_vector<float>(w_size(c), 4), bias = random_vector<float>(c.oc, 5);
      int64_t covered = -1;  // a pixel some window reads: its NaN must reach those outputs
      for_each_tap(c.s, [&](int64_t b, int64_t, int64_t, int64_t, int64_t, int64_t ih, int64_t iw) {
        if (covered < 0) covered = Ix{c.s, c.oc}.x(b, ih, iw, 0);
      });
      x[covered] = NAN;
      const auto old = random_vector<float>(y_size(c), 6);
      std::vector<float> y = old;
      ConvEpilogue e;
      e.bias = bias.data();
      e.accumulate = true;
      e.relu = true;
      conv_nhwc_forward(c.s, c.oc, x.data(), w.data(), y.data(), e);
      std::vector<double> expected = reference_forward(c, x, w);
      for (size_t i = 0; i < expected.size(); ++i) {
        const double v = expected[i] + bias[i % c.oc] + old[i];
        expected[i] = std::isnan(v) ? v : std::max(v, 0.0);
      }
      EXPECT_TRUE(close(y, expected, test::kFloatKernelTol, "epilogue " + name(c)));
      EXPECT_TRUE(std::any_of(y.begin(), y.end(), [](float v) { return std::isnan(v); })) << name(c);
    }
  }
}

TEST(DirectConv, InputGradientMatchesNaiveLoopsOverwrittenOrAccumulated) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    for (const Case& c : kCases) {
      const Ix ix{c.s, c.oc};
      const auto dy = random_vector<float>(y_size(c), 7), w = random_vector<float>(w_size(c), 8);
      std::vector<double> expected(static_cast<size_t>(x_size(c.s)), 0.0);
      for_each_tap(c.s, [&](int64_t b, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
        for (int64_t o = 0; o < c.oc; ++o)
          for (int64_t ch = 0; ch < c.s.channels; ++ch)
            expected[ix.x(b, ih, iw, ch)] += double(dy[ix.y(b, oh, ow, o)]) * w[ix.w(o, kh, kw, ch)];
      });
      std::vector<float> dx(expected.size(), NAN);
      conv_nhwc_backward_input(c.s, c.oc, dy.data(), w.data(), dx.data(), false);
      EXPECT_TRUE(close(dx, expected, test::kFloatKernelTol, "dx " + name(c)));
      const auto old = random_vector<float>(x_size(c.s), 9);
      dx = old;
      conv_nhwc_backward_input(c.s, c.oc, dy.data(), w.data(), dx.data(), true);
      for (size_t i = 0; i < expected.size(); ++i) expected[i] += old[i];
      EXPECT_TRUE(close(dx, expected, test::kFloatKernelTol, "dx += " + name(c)));
    }
  }
}

TEST(DirectConv, WeightGradientMatchesNaiveLoops) {
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    for (const Case& c : kCases) {
      const Ix ix{c.s, c.oc};
      const auto x = random_vector<float>(x_size(c.s), 10), dy = random_vector<float>(y_size(c), 11);
      std::vector<double> expected(static_cast<size_t>(w_size(c)), 0.0);
      for_each_tap(c.s, [&](int64_t b, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
        for (int64_t o = 0; o < c.oc; ++o)
          for (int64_t ch = 0; ch < c.s.channels; ++ch)
            expected[ix.w(o, kh, kw, ch)] += double(dy[ix.y(b, oh, ow, o)]) * x[ix.x(b, ih, iw, ch)];
      });
      std::vector<float> dw(expected.size(), NAN);
      conv_nhwc_backward_weight(c.s, c.oc, x.data(), dy.data(), dw.data());
      EXPECT_TRUE(close(dw, expected, test::kFloatKernelTol, "dw " + name(c)));
    }
  }
}

TEST(DirectConv, NamesTheMicroKernelOfTheActiveIsa) {
  const ScopedIsaLimit limit(Isa::Scalar);
  EXPECT_EQ(std::string(conv_kernel_name()), "scalar 4x16");
}

}  // namespace
}  // namespace vit::kernels
