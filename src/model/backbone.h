// The convolutional stages of a hybrid ViT (the original ViT paper's hybrid, small; LeViT's and
// CoAtNet's convolutions-first idea): a ResNet-style backbone whose feature map the patch
// embedding reads instead of the image.
//   stem        Conv2d(C_in, C, 3x3, stride conv_stem_stride (1 or 2), padding 1) -> BatchNorm2d -> ReLU
//   stages.0    conv_blocks x BasicBlock(C) at the stem's resolution
//   stages.s    BasicBlock(C << (s-1) -> C << s, stride 2, with a 1x1 stride-2 Conv2d + BatchNorm2d
//               shortcut "downsample"), then conv_blocks - 1 x BasicBlock(C << s)
// BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), 3x3 convolutions without bias
// (the BatchNorm after each one has it), as torchvision's ResNet names them (conv1, bn1, conv2,
// bn2, downsample.{conv,bn}). Initialised as torchvision initialises ResNets: He-normal
// (fan_out) convolutions, BatchNorm ones / zeros, and the last BatchNorm of each residual branch
// zero (timm's zero_init_last: each block starts as its shortcut).
// The maps are channels-last (B, H, W, C) throughout (conv2d_channels_last, batch_norm_channels_last):
// the same arithmetic as the (B, C, H, W) modules' forward, without a permute between layers, and
// the last map's rows are already the patch embedding's input. The modules (nn::Conv2d,
// nn::BatchNorm2d) hold the parameters under PyTorch's names and shapes.
#pragma once

#include <memory>

#include "model/vit_config.h"
#include "nn/layers.h"

namespace vit::model {

// Conv2d (no bias) -> BatchNorm2d [-> ReLU] on a channels-last map: children "conv" and "bn".
class ConvBn : public nn::Module {
 public:
  ConvBn(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool relu, Generator& gen);
  Variable forward(const Variable& x) override;
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
  bool relu;
};

class BasicBlock : public nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride, Generator& gen);
  Variable forward(const Variable& x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<ConvBn> downsample;  // null when the block keeps shape (identity shortcut)
};

// A convolution with the BatchNorm after it folded in (inference; the session and vit export):
// weight (O, C, K, K) = W * g, bias (O) = beta - running_mean * g, g = gamma / sqrt(running_var + eps),
// in double before rounding to float32. Throws "[inference] ..." for a convolution with a bias, a
// padding other than K / 2 or a BatchNorm of another width.
struct FoldedConv {
  Tensor weight, bias;
};
FoldedConv fold_conv_bn(const nn::Conv2d& conv, const nn::BatchNorm2d& bn);

class ConvBackbone : public nn::Module {
 public:
  ConvBackbone(const ViTConfig& config, Generator& gen);
  // images (B, C_in, H, W) -> the last map channels-last (B, H / feature_stride, W / feature_stride,
  // embed_channels)
  Variable forward(const Variable& images) override;
  std::shared_ptr<ConvBn> stem;
  std::shared_ptr<nn::Sequential> stages;  // stages.{s}.{b}: BasicBlocks
};

}  // namespace vit::model
