// Softmax cross-entropy over logits (R, K) with integer targets (R), mean over rows, with
// PyTorch's label smoothing: target distribution q = (1 - eps) onehot(y) + eps / K;
// loss_r = -sum_k q_k log p_k. Forward saves probabilities p (R, K); backward accumulates
// dlogits += dloss / R * (p - q). Targets are validated by the caller.
#pragma once

#include <cstdint>

namespace vit::kernels {

template <typename T>
double cross_entropy_forward(const T* logits, const int64_t* targets, int64_t rows, int64_t classes, double smoothing,
                             T* probs);
template <typename T>
void cross_entropy_backward(const T* probs, const int64_t* targets, int64_t rows, int64_t classes, double smoothing,
                            double dloss, T* dlogits);

// References, written for reading: the definition in double, one row at a time.
// Forward: the mean loss over rows (NaN for no rows), probs (R, K) written as the forward does.
template <typename T>
double cross_entropy_forward_ref(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                                 double smoothing, T* probs);
// dlogits (R, K) += dloss / R * (p - q). The same arguments as cross_entropy_backward, except
// that it takes the logits (R, K) and recomputes p in double instead of reading saved probs.
template <typename T>
void cross_entropy_backward_ref(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                                double smoothing, double dloss, T* dlogits);

}  // namespace vit::kernels
