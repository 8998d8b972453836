// The convolutional backbone of a hybrid ViT (see backbone.h).
#include "model/backbone.h"

#include <cmath>

#include "core/check.h"
#include "nn/init.h"

namespace vit::model {
namespace {

// torchvision's ResNet: kaiming_normal_(mode="fan_out", nonlinearity="relu"), std sqrt(2 / fan_out).
std::shared_ptr<nn::Conv2d> he_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, Generator& gen) {
  auto conv = std::make_shared<nn::Conv2d>(in, out, kernel, stride, kernel / 2, /*bias=*/false, gen);
  Tensor w = conv->weight.data();
  nn::init::normal_(w, 0.0, std::sqrt(2.0 / static_cast<double>(out * kernel * kernel)), gen);
  return conv;
}

// The modules' arithmetic on channels-last maps.
Variable conv(const nn::Conv2d& c, const Variable& x) {
  return conv2d_channels_last(x, c.weight, c.bias, c.stride, c.padding, c.precision);
}
Variable norm(const nn::BatchNorm2d& bn, const Variable& x) {
  return batch_norm_channels_last(x, bn.running_mean.data(), bn.running_var.data(), bn.weight, bn.bias,
                                  bn.is_training(), bn.momentum, bn.eps);
}

}  // namespace

ConvBn::ConvBn(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool relu_, Generator& gen) : relu(relu_) {
  conv = register_module("conv", he_conv(in, out, kernel, stride, gen));
  bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(out));
}

Variable ConvBn::forward(const Variable& x) {
  Variable y = norm(*bn, model::conv(*conv, x));
  return relu ? vit::relu(y) : y;
}

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride, Generator& gen) {
  conv1 = register_module("conv1", he_conv(in, out, 3, stride, gen));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(out));
  conv2 = register_module("conv2", he_conv(out, out, 3, 1, gen));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(out));
  bn2->weight.data().fill_(0.0);  // zero_init_last
  if (stride != 1 || in != out)
    downsample = register_module("downsample", std::make_shared<ConvBn>(in, out, 1, stride, false, gen));
}

Variable BasicBlock::forward(const Variable& x) {
  const Variable h = relu(norm(*bn1, conv(*conv1, x)));
  const Variable branch = norm(*bn2, conv(*conv2, h));
  return relu(branch + (downsample ? downsample->forward(x) : x));
}

ConvBackbone::ConvBackbone(const ViTConfig& c, Generator& gen) {
  stem = register_module("stem",
                         std::make_shared<ConvBn>(c.in_channels, c.conv_channels, 3, c.conv_stem_stride, true, gen));
  stages = register_module("stages", std::make_shared<nn::Sequential>());
  int64_t channels = c.conv_channels;
  for (int64_t s = 0; s < c.conv_stages; ++s) {
    auto stage = std::make_shared<nn::Sequential>();
    const int64_t out = c.conv_channels << s;
    for (int64_t b = 0; b < c.conv_blocks; ++b) {
      stage->push_back(std::make_shared<BasicBlock>(channels, out, s > 0 && b == 0 ? 2 : 1, gen));
      channels = out;
    }
    stages->push_back(stage);
  }
}

Variable ConvBackbone::forward(const Variable& images) {
  VIT_CHECK(images.dim() == 4, "backbone", "input {}: expected (B, C, H, W)", shape_str(images.shape()));
  return stages->forward(stem->forward(images.permute({0, 2, 3, 1})));  // (B, H, W, C) from here
}

}  // namespace vit::model

namespace vit::model {

FoldedConv fold_conv_bn(const nn::Conv2d& conv, const nn::BatchNorm2d& bn) {
  const int64_t O = conv.out_channels, C = conv.in_channels, K = conv.kernel_size;
  VIT_CHECK(bn.num_features == O && !conv.bias.defined() && conv.padding == K / 2, "inference",
            "a backbone convolution ({} -> {}, {}x{}) must have no bias, padding {} and a BatchNorm of its {} "
            "channels after it",
            C, O, K, K, K / 2, O);
  const Tensor w = conv.weight.data().contiguous().to(DType::F32);
  const Tensor gamma = bn.weight.data().contiguous(), beta = bn.bias.data().contiguous();
  const Tensor mean = bn.running_mean.data().contiguous(), var = bn.running_var.data().contiguous();
  FoldedConv out{Tensor::empty({O, C, K, K}), Tensor::empty({O})};
  const float* src = w.data<float>();
  float* dst = out.weight.data<float>();
  const int64_t L = C * K * K;
  for (int64_t o = 0; o < O; ++o) {
    const double g = gamma.data<float>()[o] / std::sqrt(static_cast<double>(var.data<float>()[o]) + bn.eps);
    out.bias.data<float>()[o] = static_cast<float>(beta.data<float>()[o] - mean.data<float>()[o] * g);
    for (int64_t i = 0; i < L; ++i) dst[o * L + i] = static_cast<float>(src[o * L + i] * g);
  }
  return out;
}

}  // namespace vit::model
