// Batch normalisation (torch.nn.BatchNorm2d's arithmetic) over x laid out as (B, C, S): channel c
// of sample b is the S = H*W contiguous values at x + (b*C + c)*S. Statistics are per channel over
// the B*S values, summed in double, the variance the population one (biased, as PyTorch
// normalises with; the caller derives the unbiased one for the running estimate).
#pragma once

#include <cstdint>

namespace vit::kernels {

// mean (C) and population variance (C) of each channel.
template <typename T>
void batchnorm_stats(const T* x, int64_t B, int64_t C, int64_t S, T* mean, T* var);

// y = (x - mean[c]) * rstd[c] * weight[c] + bias[c] (weight / bias null: 1 / 0).
template <typename T>
void batchnorm_forward(const T* x, const T* mean, const T* rstd, const T* weight, const T* bias, T* y, int64_t B,
                       int64_t C, int64_t S);

// The gradients of sum(dy * y) for the forward above, accumulated (+=) into dx, dweight, dbias
// (each null when not wanted). batch_stats: mean and rstd were the batch's own (training), so they
// depend on x: dx = w * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)); otherwise (evaluation,
// running statistics) they are constants: dx = w * rstd * dy.
template <typename T>
void batchnorm_backward(const T* x, const T* mean, const T* rstd, const T* weight, const T* dy, T* dx, T* dweight,
                        T* dbias, int64_t B, int64_t C, int64_t S, bool batch_stats);

// The same over channels-last values x (P, C) (P = B*H*W positions, channel c the column c):
// statistics per column, the same formulas. Threads split the rows and sum per-thread partials.
template <typename T>
void batchnorm_stats_rows(const T* x, int64_t P, int64_t C, T* mean, T* var);
template <typename T>
void batchnorm_forward_rows(const T* x, const T* mean, const T* rstd, const T* weight, const T* bias, T* y, int64_t P,
                            int64_t C);
template <typename T>
void batchnorm_backward_rows(const T* x, const T* mean, const T* rstd, const T* weight, const T* dy, T* dx, T* dweight,
                             T* dbias, int64_t P, int64_t C, bool batch_stats);

}  // namespace vit::kernels
