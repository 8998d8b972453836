// im2row / row2im (see im2row.h). Zero padding outside the image.
#include "kernels/im2row.h"

namespace vit::kernels {

template <typename T>
void im2row(const ConvShape& s, const T* x, T* rows) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length();
#pragma omp parallel for collapse(2) schedule(static) if (s.batch * OH * OW * L > (1 << 15))
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        T* row = rows + ((b * OH + oh) * OW + ow) * L;
        for (int64_t c = 0; c < s.channels; ++c) {
          const T* plane = x + (b * s.channels + c) * s.height * s.width;
          for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
            const int64_t ih = oh * s.stride - s.padding + kh;
            for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
              const int64_t iw = ow * s.stride - s.padding + kw;
              const bool inside = ih >= 0 && ih < s.height && iw >= 0 && iw < s.width;
              *row++ = inside ? plane[ih * s.width + iw] : T(0);
            }
          }
        }
      }
    }
  }
}

template <typename T>
void row2im(const ConvShape& s, const T* rows, T* dx) {
  const int64_t OH = s.out_h(), OW = s.out_w(), L = s.row_length();
  // Parallel over images only: windows of one image may overlap (stride < kernel).
#pragma omp parallel for schedule(static) if (s.batch > 1 && s.batch * OH * OW * L > (1 << 15))
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const T* row = rows + ((b * OH + oh) * OW + ow) * L;
        for (int64_t c = 0; c < s.channels; ++c) {
          T* plane = dx + (b * s.channels + c) * s.height * s.width;
          for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
            const int64_t ih = oh * s.stride - s.padding + kh;
            for (int64_t kw = 0; kw < s.kernel_w; ++kw, ++row) {
              const int64_t iw = ow * s.stride - s.padding + kw;
              if (ih >= 0 && ih < s.height && iw >= 0 && iw < s.width) plane[ih * s.width + iw] += *row;
            }
          }
        }
      }
    }
  }
}

template void im2row<float>(const ConvShape&, const float*, float*);
template void im2row<double>(const ConvShape&, const double*, double*);
template void row2im<float>(const ConvShape&, const float*, float*);
template void row2im<double>(const ConvShape&, const double*, double*);

}  // namespace vit::kernels
