// The direct convolution's drivers (see direct_conv.h): B packed in 16-column panels, the row
// pointers of each tile made from its positions, the micro-kernels of conv_micro.h doing the sums.
#include "kernels/conv/direct_conv.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/aligned.h"
#include "kernels/conv/conv_micro.h"
#include "kernels/threads.h"

namespace vit::kernels {
namespace {

using conv::ConvMicroKernels;
using conv::kPanel;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// body(begin, end) over contiguous shares of [0, n), one per thread when `big` (else the whole on
// the calling thread); `thread` is the share's index.
template <typename Body>
void for_shares(int64_t n, bool big, Body&& body) {
  if (!parallel_worth(big) || n < 2) return body(0, int64_t{0}, n);
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    body(thread, n * thread / threads, n * (thread + 1) / threads);
  }
}

// The forward's rows: output position p reads, at tap (kh, kw), the input pixel it covers.
struct ForwardRows {
  const ConvShape& s;
  const float* x;
  int64_t oh_ow, ow_count;
  struct At {
    const float* image;
    int64_t ih0, iw0;
  };
  At locate(int64_t p) const {
    const int64_t b = p / oh_ow, rest = p % oh_ow, oh = rest / ow_count, ow = rest % ow_count;
    return {x + b * s.height * s.width * s.channels, oh * s.stride - s.padding, ow * s.stride - s.padding};
  }
  const float* row(const At& at, int64_t kh, int64_t kw) const {
    const int64_t ih = at.ih0 + kh, iw = at.iw0 + kw;
    if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) return nullptr;
    return at.image + (ih * s.width + iw) * s.channels;
  }
};

// The input gradient's rows: input pixel p gathers, at tap (kh, kw), the output position whose
// window put that tap on it (if any: with stride > 1 most taps reach none).
struct BackwardRows {
  const ConvShape& s;
  const float* dy;
  int64_t oh_count, ow_count, out_channels;
  struct At {
    const float* image;
    int64_t th0, tw0;  // ih + padding, iw + padding
  };
  At locate(int64_t p) const {
    const int64_t hw = s.height * s.width, b = p / hw, rest = p % hw;
    return {dy + b * oh_count * ow_count * out_channels, rest / s.width + s.padding, rest % s.width + s.padding};
  }
  static bool output_index(int64_t t, int64_t stride, int64_t count, int64_t& o) {
    if (t < 0) return false;
    if (stride == 1) {
      o = t;
    } else {
      if (t % stride != 0) return false;
      o = t / stride;
    }
    return o < count;
  }
  const float* row(const At& at, int64_t kh, int64_t kw) const {
    int64_t oh = 0, ow = 0;
    if (!output_index(at.th0 - kh, s.stride, oh_count, oh) || !output_index(at.tw0 - kw, s.stride, ow_count, ow))
      return nullptr;
    return at.image + (oh * ow_count + ow) * out_channels;
  }
};

// out (m, n) [op]= sum over taps t and k < depth of row(p, t)[k] * B[t][k][n], B packed as
// [panel][tap][k][16] (zero-padded to whole panels).
template <typename Rows>
void run_igemm(const Rows& rows_of, int64_t m, int64_t kh_count, int64_t kw_count, int64_t depth, int64_t n,
               const float* packed, float* out, const ConvEpilogue& e) {
  const ConvMicroKernels& mk = conv::pick_conv_micro();
  const int64_t mr = mk.mr, taps = kh_count * kw_count, tiles = ceil_div(m, mr), panels = ceil_div(n, kPanel);
  const int64_t b_panel = taps * depth * kPanel;
  const std::vector<float> zeros(static_cast<size_t>(std::max<int64_t>(depth, 1)), 0.0f);
  const bool big = m * taps * depth * n > (int64_t{1} << 16);
  for_shares(tiles, big, [&](int64_t, int64_t begin, int64_t end) {
    std::vector<const float*> a(static_cast<size_t>(taps * mr)), b(static_cast<size_t>(taps));
    std::vector<int64_t> active(static_cast<size_t>(taps));
    std::vector<typename Rows::At> at(static_cast<size_t>(mr));
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t m0 = tile * mr, rows = std::min(mr, m - m0);
      for (int64_t r = 0; r < rows; ++r) at[r] = rows_of.locate(m0 + r);
      int64_t count = 0;
      for (int64_t kh = 0; kh < kh_count; ++kh) {
        for (int64_t kw = 0; kw < kw_count; ++kw) {
          const float** tap_rows = a.data() + count * mr;
          bool any = false;
          for (int64_t r = 0; r < mr; ++r) {
            const float* row = r < rows ? rows_of.row(at[r], kh, kw) : nullptr;
            any = any || row != nullptr;
            tap_rows[r] = row ? row : zeros.data();
          }
          if (any) active[count++] = kh * kw_count + kw;
        }
      }
      for (int64_t panel0 = 0; panel0 < panels; panel0 += mk.panels) {
        conv::IgemmArgs g;
        g.cols = std::min(mk.panels * kPanel, n - panel0 * kPanel);
        for (int64_t i = 0; i < count; ++i) b[i] = packed + panel0 * b_panel + active[i] * depth * kPanel;
        g.taps = count;
        g.a = a.data();
        g.b = b.data();
        g.b_panel = b_panel;
        g.k = depth;
        g.out = out + m0 * n + panel0 * kPanel;
        g.ldo = n;
        g.rows = rows;
        g.bias = e.bias ? e.bias + panel0 * kPanel : nullptr;
        g.accumulate = e.accumulate;
        g.relu = e.relu;
        (g.cols > kPanel ? mk.igemm : mk.igemm1)(g);
      }
    }
  });
}

}  // namespace

void conv_nhwc_forward(const ConvShape& s, int64_t out_channels, const float* x, const float* w, float* y,
                       const ConvEpilogue& epilogue) {
  const int64_t OC = out_channels, C = s.channels, taps = s.kernel_h * s.kernel_w;
  const int64_t panels = ceil_div(OC, kPanel), OH = s.out_h(), OW = s.out_w();
  // [panel][tap][c][16] = w[oc][tap][c], oc = panel * 16 + column.
  const AlignedArray<float> packed = aligned_array<float>(static_cast<size_t>(panels * taps * C * kPanel), true);
  for (int64_t oc = 0; oc < OC; ++oc) {
    float* dst = packed.get() + (oc / kPanel) * taps * C * kPanel + oc % kPanel;
    const float* src = w + oc * taps * C;
    for (int64_t i = 0; i < taps * C; ++i) dst[i * kPanel] = src[i];
  }
  const ForwardRows rows{s, x, OH * OW, OW};
  run_igemm(rows, s.batch * OH * OW, s.kernel_h, s.kernel_w, C, OC, packed.get(), y, epilogue);
}

void conv_nhwc_backward_input(const ConvShape& s, int64_t out_channels, const float* dy, const float* w, float* dx,
                              bool accumulate) {
  const int64_t OC = out_channels, C = s.channels, taps = s.kernel_h * s.kernel_w;
  const int64_t panels = ceil_div(C, kPanel);
  // [panel][tap][oc][16] = w[oc][tap][c], c = panel * 16 + column.
  const AlignedArray<float> packed = aligned_array<float>(static_cast<size_t>(panels * taps * OC * kPanel), true);
  for (int64_t oc = 0; oc < OC; ++oc) {
    for (int64_t t = 0; t < taps; ++t) {
      const float* src = w + (oc * taps + t) * C;
      for (int64_t c = 0; c < C; ++c) packed[((c / kPanel * taps + t) * OC + oc) * kPanel + c % kPanel] = src[c];
    }
  }
  const BackwardRows rows{s, dy, s.out_h(), s.out_w(), OC};
  ConvEpilogue e;
  e.accumulate = accumulate;
  run_igemm(rows, s.batch * s.height * s.width, s.kernel_h, s.kernel_w, OC, C, packed.get(), dx, e);
}

void conv_nhwc_backward_weight(const ConvShape& s, int64_t out_channels, const float* x, const float* dy, float* dw) {
  constexpr int64_t kChunk = 256;  // positions per pass: their dy and pixels stay in L2
  const ConvMicroKernels& mk = conv::pick_conv_micro();
  const int64_t OC = out_channels, C = s.channels, taps = s.kernel_h * s.kernel_w, OH = s.out_h(), OW = s.out_w();
  const int64_t positions = s.batch * OH * OW, size = taps * C * OC, wide = mk.wpanels * kPanel;
  const bool big = positions * size > (int64_t{1} << 16);
  const int threads = parallel_worth(big) ? omp_get_max_threads() : 1;
  std::vector<float> partial(static_cast<size_t>(threads * size), 0.0f);  // per share: [tap][c][oc]
  const std::vector<float> zeros(static_cast<size_t>(std::max<int64_t>(C, 1)), 0.0f);
  const ForwardRows rows_of{s, x, OH * OW, OW};
  auto share = [&](int64_t thread, int64_t begin, int64_t end) {
    float* part = partial.data() + thread * size;
    std::vector<const float*> a(static_cast<size_t>(taps * kChunk));
    for (int64_t q0 = begin; q0 < end; q0 += kChunk) {
      const int64_t count = std::min(kChunk, end - q0);
      for (int64_t i = 0; i < count; ++i) {
        const auto at = rows_of.locate(q0 + i);
        for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
          for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const float* row = rows_of.row(at, kh, kw);
            a[(kh * s.kernel_w + kw) * kChunk + i] = row ? row : zeros.data();
          }
        }
      }
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t c0 = 0; c0 < C; c0 += mk.wr) {
          for (int64_t oc0 = 0; oc0 < OC; oc0 += wide) {
            conv::WgradArgs g;
            g.positions = count;
            g.a = a.data() + t * kChunk;
            g.a_offset = c0;
            g.dy = dy + q0 * OC + oc0;
            g.ldy = OC;
            g.dw = part + (t * C + c0) * OC + oc0;
            g.ldw = OC;
            g.rows = std::min(mk.wr, C - c0);
            g.cols = std::min(wide, OC - oc0);
            (g.cols > kPanel ? mk.wgrad : mk.wgrad1)(g);
          }
        }
      }
    }
  };
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t n = omp_get_num_threads(), thread = omp_get_thread_num();
      share(thread, positions * thread / n, positions * (thread + 1) / n);
    }
  } else {
    share(0, 0, positions);
  }
  // dw[oc][t][c] = the shares' [t][c][oc] summed.
  for (int64_t t = 0; t < taps; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t oc = 0; oc < OC; ++oc) {
        float sum = 0.0f;
        for (int thread = 0; thread < threads; ++thread) sum += partial[thread * size + (t * C + c) * OC + oc];
        dw[(oc * taps + t) * C + c] = sum;
      }
    }
  }
}

const char* conv_kernel_name() { return conv::pick_conv_micro().name; }

}  // namespace vit::kernels
