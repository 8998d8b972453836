// Parameter initialisation, as torch.nn.init and timm do it, from an explicit Generator.
#pragma once

#include "core/tensor.h"

namespace vit::nn::init {

void uniform_(Tensor& t, double low, double high, Generator& gen);
void normal_(Tensor& t, double mean, double std, Generator& gen);
// timm's trunc_normal_: N(mean, std) redrawn until inside [a, b] (absolute bounds).
void trunc_normal_(Tensor& t, double std, Generator& gen, double mean = 0.0, double a = -2.0, double b = 2.0);
// PyTorch's default for Linear/Conv2d weights: kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void default_weight_(Tensor& t, int64_t fan_in, Generator& gen);

// While one is alive (on this thread), the random initialisers above leave tensors untouched:
// for building a model whose every weight is about to be loaded, so neither time nor memory
// (untouched pages stay unallocated) goes into values that would be overwritten.
class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace vit::nn::init
