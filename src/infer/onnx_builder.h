// Writing an ONNX graph (onnx::GraphProto, Debian's libonnx classes) a layer at a time: the
// building blocks `vit export` (onnx_export.h) writes a ViT from, each as the ops torch.onnx.export
// writes for the same PyTorch module, so that ONNX Runtime fuses them as it fuses PyTorch's
// exports (Gelu, LayerNormalization, DynamicQuantizeMatMul). Only the default domain (ai.onnx).
// Internal to infer (it exposes protobuf types); values are named by the module they belong to
// ("blocks.0.attn.qkv/MatMul").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/layers.h"
#include "onnx/onnx_pb.h"

namespace vit::infer::onnx_export {

class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto& graph, int64_t opset) : g_(graph), opset_(opset) {}
  int64_t opset() const { return opset_; }

  // An initializer holding t (float32, int64 or int8) under `name` (returned).
  std::string initializer(const std::string& name, const Tensor& t);
  // Small constants, named by value and written once: an int64 vector, a 0-d int64, a float scalar.
  std::string ints(const std::vector<int64_t>& values);
  std::string index(int64_t value);
  std::string scalar(float value);

  struct Attr {
    std::string name;
    enum class Kind { Int, Float, Ints } kind;
    int64_t i = 0;
    float f = 0;
    std::vector<int64_t> ints;
  };
  static Attr attr(const std::string& name, int64_t v) { return {name, Attr::Kind::Int, v, 0, {}}; }
  static Attr attr_f(const std::string& name, float v) { return {name, Attr::Kind::Float, 0, v, {}}; }
  static Attr attr(const std::string& name, std::vector<int64_t> v) {
    return {name, Attr::Kind::Ints, 0, 0, std::move(v)};
  }
  // A node `scope/op` (numbered when the scope has one already); returns its first output's name
  // (outputs: how many, named scope/op[:k]).
  std::string node(const std::string& scope, const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<Attr>& attrs = {}, int outputs = 1);
  std::vector<std::string> node_outputs(const std::string& scope, const std::string& op,
                                        const std::vector<std::string>& inputs, const std::vector<Attr>& attrs,
                                        int outputs);

  // LayerNorm over the last `axes` dims (1, or 2 for the ViT notebook's (N, D) norms):
  // LayerNormalization from opset 17, below it torch's decomposition (ReduceMean, Sub, Pow,
  // ReduceMean, Add eps, Sqrt, Div, Mul, Add).
  std::string layer_norm(const std::string& scope, const std::string& x, const nn::LayerNorm& ln, int axes = 1);
  // y = x W^T + b: float32 as MatMul with W^T stored (in, out) then Add (torch's form for inputs of
  // any rank); an int8 Linear (`vit quantize`) as quantize_dynamic writes it: DynamicQuantizeLinear
  // of x (uint8), MatMulInteger with the int8 W^T and zero points, Cast to float, Mul by x's scale
  // times the per-channel weight scales, then Add b.
  std::string linear(const std::string& scope, const std::string& x, const nn::Linear& linear);
  // The MLP activations as torch.onnx.export writes them.
  std::string gelu(const std::string& scope, const std::string& x);
  std::string gelu_tanh(const std::string& scope, const std::string& x);
  std::string quick_gelu(const std::string& scope, const std::string& x);

 private:
  onnx::GraphProto& g_;
  int64_t opset_;
  std::map<std::string, int> used_;               // node names taken, for numbering
  std::map<std::string, std::string> constants_;  // small constants by value
  std::set<std::string> initializers_;            // names written
};

}  // namespace vit::infer::onnx_export
