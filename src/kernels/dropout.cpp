// Dropout mask generation (see dropout.h).
#include "kernels/dropout.h"

namespace vit::kernels {

template <typename T>
void dropout_mask(T* mask, int64_t n, double p, Generator& gen) {
  const T keep_scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  for (int64_t i = 0; i < n; ++i) mask[i] = static_cast<double>(gen.uniform_float()) < p ? T(0) : keep_scale;
}

template <typename T>
void dropout_mask_batch(T* mask, int64_t n, int64_t rows, double p, Generator& gen) {
  if (!gen.sample_keyed() || rows <= 0) {
    dropout_mask(mask, n, p, gen);
    return;
  }
  const uint64_t call = gen.next_call();
  const int64_t per = n / rows;
  for (int64_t b = 0; b < rows; ++b) {
    Generator stream = gen.sample_stream(call, b);
    dropout_mask(mask + b * per, per, p, stream);
  }
}

template void dropout_mask_batch<float>(float*, int64_t, int64_t, double, Generator&);
template void dropout_mask_batch<double>(double*, int64_t, int64_t, double, Generator&);
template void dropout_mask<float>(float*, int64_t, double, Generator&);
template void dropout_mask<double>(double*, int64_t, double, Generator&);

}  // namespace vit::kernels
