// ViT graphs in ONNX files, recognised by pattern and their weights mapped to timm's names: the
// graphs torch.onnx.export writes for torchvision's, timm's and Hugging Face's ViTs (opsets 13-17,
// constant-folded or not) and the ones `vit export` writes. No graph is interpreted: the
// parametric ops are found in the graph's order -- the patch Conv, the prefix tokens' Concat, the
// position table's Add, LayerNorms (LayerNormalization, or torch's ReduceMean/Sub/Pow/ReduceMean/
// Add/Sqrt/Div/Mul/Add decomposition), Linears (MatMul or Gemm with a constant weight, folded or
// through a Transpose, and the Add of their bias), LayerScale Muls, the attention's scale (Mul or
// Div by a scalar: the head width), Softmax, the MLP activation (Erf: GELU; Tanh: its tanh form;
// Sigmoid: QuickGELU; Relu), the class-row Gather or the patch mean -- and read as a ViT's
// sequence: patch embedding, [prefix, positions], [norm_pre], blocks of (norm1, q/k/v or qkv,
// [q_norm, k_norm], scale, Softmax, proj, [ls1], norm2, fc1, act, fc2, [ls2]), [norm], pooling,
// [fc_norm], [pre_logits + Tanh], head [, head_dist]. Plumbing ops (Reshape, Transpose, Gather,
// Shape, ...) are passed over; any other op, a constant weight the pattern did not use, or a
// sequence that is not a ViT's is refused, naming the node.
#pragma once

#include <cstdint>
#include <string>

#include "io/onnx.h"
#include "model/layouts/layout.h"
#include "model/vit_config.h"

namespace vit::model {

struct OnnxRecognised {
  Converted converted;                      // timm names; heads, eps, act, family
  Layout layout = Layout::Timm;             // whose names the initializers carry (for its preprocessing)
  int64_t in_channels = 0, image_size = 0;  // the graph input's (0 where symbolic)
  int64_t blocks = 0;
  bool head_tanh = false;  // tanh(head(x)) (the ViT notebook)
  std::string summary;     // "opset 14, 2 blocks, 4 heads of 12, GELU, ..." for notes
};

// Throws "[onnx] PATH: ..." naming what was not recognised. `known`: the config the file records
// (vit export's metadata), which tells the prefix tokens apart; else the pooling and heads do.
OnnxRecognised recognise_onnx_vit(const io::OnnxModel& m, const ViTConfig* known = nullptr);

}  // namespace vit::model
