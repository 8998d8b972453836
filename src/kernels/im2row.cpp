// im2row / row2im (see im2row.h). Zero padding outside the image. A receptive field is walked
// as (c, kh) runs of kernel_w input columns: the run's in-image part [lo, hi) is one contiguous
// copy (or add) and the rest zeros, so no element pays a bounds test (the per-element test made
// im2row ~7% of the Fashion-MNIST hybrid's training step).
#include "kernels/im2row.h"

#include <algorithm>

#include "kernels/threads.h"

namespace vit::kernels {
namespace {

// The in-image columns [lo, hi) of a run of kernel_w columns starting at input column iw0.
struct Run {
  int64_t lo, hi;
};
inline Run column_run(const ConvShape& s, int64_t iw0) {
  const int64_t lo = std::clamp<int64_t>(-iw0, 0, s.kernel_w);
  const int64_t hi = std::clamp<int64_t>(s.width - iw0, lo, s.kernel_w);
  return {lo, hi};
}

// KW > 0: the kernel width known at compile time (whole in-image runs become fixed-size copies);
// 0: any width.
template <typename T, int64_t KW_FIXED>
void im2row_impl(const ConvShape& s, const T* x, T* rows) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length(), KW = KW_FIXED > 0 ? KW_FIXED : s.kernel_w;
  parallel_for(s.batch * OH, s.batch * OH * OW * L > (1 << 15), [&](int64_t image_row) {
    const int64_t b = image_row / OH, oh = image_row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* __restrict row = rows + ((b * OH + oh) * OW + ow) * L;
      const int64_t iw0 = ow * s.stride - s.padding;
      const Run run = column_run(s, iw0);
      const bool whole = run.lo == 0 && run.hi == KW;
      for (int64_t c = 0; c < s.channels; ++c) {
        const T* plane = x + (b * s.channels + c) * s.height * s.width;
        for (int64_t kh = 0; kh < s.kernel_h; ++kh, row += KW) {
          const int64_t ih = oh * s.stride - s.padding + kh;
          if (ih < 0 || ih >= s.height) {
            for (int64_t kw = 0; kw < KW; ++kw) row[kw] = T(0);
            continue;
          }
          const T* __restrict in = plane + ih * s.width + iw0 + run.lo;  // column lo of the run
          if (KW_FIXED > 0 && whole) {
#pragma GCC unroll 8
            for (int64_t kw = 0; kw < KW; ++kw) row[kw] = in[kw];
            continue;
          }
          for (int64_t kw = 0; kw < run.lo; ++kw) row[kw] = T(0);
          for (int64_t kw = run.lo; kw < run.hi; ++kw) row[kw] = in[kw - run.lo];
          for (int64_t kw = run.hi; kw < KW; ++kw) row[kw] = T(0);
        }
      }
    }
  });
}

}  // namespace

template <typename T>
void im2row(const ConvShape& s, const T* x, T* rows) {
  switch (s.kernel_w) {  // the stems' 3x3 and the 28x28 presets' 7x7 patches
    case 3:
      return im2row_impl<T, 3>(s, x, rows);
    case 7:
      return im2row_impl<T, 7>(s, x, rows);
    default:
      return im2row_impl<T, 0>(s, x, rows);
  }
}

template <typename T>
void row2im(const ConvShape& s, const T* rows, T* dx) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length(), KW = s.kernel_w;
  // Parallel over images only: windows of one image may overlap (stride < kernel).
  parallel_for(s.batch, s.batch * OH * OW * L > (1 << 15), [&](int64_t b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const T* __restrict row = rows + ((b * OH + oh) * OW + ow) * L;
        const int64_t iw0 = ow * s.stride - s.padding;
        const Run run = column_run(s, iw0);
        for (int64_t c = 0; c < s.channels; ++c) {
          T* plane = dx + (b * s.channels + c) * s.height * s.width;
          for (int64_t kh = 0; kh < s.kernel_h; ++kh, row += KW) {
            const int64_t ih = oh * s.stride - s.padding + kh;
            if (ih < 0 || ih >= s.height) continue;
            T* __restrict out = plane + ih * s.width + iw0 + run.lo;
            for (int64_t kw = run.lo; kw < run.hi; ++kw) out[kw - run.lo] += row[kw];
          }
        }
      }
    }
  });
}

template <typename T>
void im2row_nhwc(const ConvShape& s, const T* x, T* rows) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length(), C = s.channels;
  parallel_for(s.batch * OH, s.batch * OH * OW * L > (1 << 15), [&](int64_t image_row) {
    const int64_t b = image_row / OH, oh = image_row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* __restrict row = rows + ((b * OH + oh) * OW + ow) * L;
      for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
        const int64_t ih = oh * s.stride - s.padding + kh;
        for (int64_t kw = 0; kw < s.kernel_w; ++kw, row += C) {
          const int64_t iw = ow * s.stride - s.padding + kw;
          if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) {
            std::fill(row, row + C, T(0));
          } else {
            const T* __restrict in = x + ((b * s.height + ih) * s.width + iw) * C;
            std::copy(in, in + C, row);
          }
        }
      }
    }
  });
}

template <typename T>
void row2im_nhwc(const ConvShape& s, const T* rows, T* dx) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length(), C = s.channels;
  // Parallel over images only: windows of one image may overlap (stride < kernel).
  parallel_for(s.batch, s.batch * OH * OW * L > (1 << 15), [&](int64_t b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const T* __restrict row = rows + ((b * OH + oh) * OW + ow) * L;
        for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
          const int64_t ih = oh * s.stride - s.padding + kh;
          for (int64_t kw = 0; kw < s.kernel_w; ++kw, row += C) {
            const int64_t iw = ow * s.stride - s.padding + kw;
            if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
            T* __restrict out = dx + ((b * s.height + ih) * s.width + iw) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) out[c] += row[c];
          }
        }
      }
    }
  });
}

template void im2row<float>(const ConvShape&, const float*, float*);
template void im2row_nhwc<float>(const ConvShape&, const float*, float*);
template void im2row_nhwc<double>(const ConvShape&, const double*, double*);
template void row2im_nhwc<float>(const ConvShape&, const float*, float*);
template void row2im_nhwc<double>(const ConvShape&, const double*, double*);
template void im2row<double>(const ConvShape&, const double*, double*);
template void row2im<float>(const ConvShape&, const float*, float*);
template void row2im<double>(const ConvShape&, const double*, double*);

}  // namespace vit::kernels
