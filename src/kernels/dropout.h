// Inverted-dropout masks: mask[i] = 0 with probability p, else 1 / (1 - p). The mask is
// multiplied into the forward and, unchanged, into the backward. Drawn sequentially from the
// generator so a seed fixes the mask whatever the thread count.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace vit::kernels {

template <typename T>
void dropout_mask(T* mask, int64_t n, double p, Generator& gen);

// The mask of a batch of `rows` samples (n / rows elements each): per-sample streams when gen is
// keyed by sample (Generator::key_by_sample), else dropout_mask over all n in sequence.
template <typename T>
void dropout_mask_batch(T* mask, int64_t n, int64_t rows, double p, Generator& gen);

}  // namespace vit::kernels
