// The ONNX graph builder (see onnx_builder.h).
#include "infer/onnx_builder.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/check.h"

namespace vit::infer::onnx_export {

namespace {

void set_dims(onnx::TensorProto& t, const Shape& shape) {
  for (int64_t d : shape) t.add_dims(d);
}

}  // namespace

std::string GraphBuilder::initializer(const std::string& name, const Tensor& tensor) {
  if (!initializers_.insert(name).second) return name;  // written once (a LayerNorm used twice)
  onnx::TensorProto* t = g_.add_initializer();
  t->set_name(name);
  const Tensor c = tensor.contiguous();
  set_dims(*t, c.shape());
  switch (c.dtype()) {
    case DType::F32:
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->set_raw_data(c.data<float>(), static_cast<size_t>(c.numel()) * 4);
      break;
    case DType::I64:
      t->set_data_type(onnx::TensorProto::INT64);
      t->set_raw_data(c.data<int64_t>(), static_cast<size_t>(c.numel()) * 8);
      break;
    case DType::I8:
      t->set_data_type(onnx::TensorProto::INT8);
      t->set_raw_data(c.data<int8_t>(), static_cast<size_t>(c.numel()));
      break;
    default:
      fail("export", "tensor '{}' is {}, which the exporter does not write", name, dtype_name(c.dtype()));
  }
  return name;
}

std::string GraphBuilder::ints(const std::vector<int64_t>& values) {
  const std::string key = "ints:" + fmt::format("{}", fmt::join(values, ","));
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  const std::string name = fmt::format("const/ints_{}", fmt::join(values, "_"));
  Tensor t = Tensor::from_data(values, {static_cast<int64_t>(values.size())});
  return constants_[key] = initializer(name, t);
}

std::string GraphBuilder::index(int64_t value) {
  const std::string key = fmt::format("index:{}", value);
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  Tensor t = Tensor::from_data(std::vector<int64_t>{value}, {});
  return constants_[key] = initializer(fmt::format("const/index_{}", value), t);
}

std::string GraphBuilder::scalar(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const std::string key = fmt::format("f:{:08x}", bits);
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  Tensor t = Tensor::from_data(std::vector<float>{value}, {});
  return constants_[key] = initializer(fmt::format("const/{}", fmt::format("{}", value)), t);
}

std::vector<std::string> GraphBuilder::node_outputs(const std::string& scope, const std::string& op,
                                                    const std::vector<std::string>& inputs,
                                                    const std::vector<Attr>& attrs, int outputs) {
  std::string name = scope.empty() ? op : scope + "/" + op;
  const int n = used_[name]++;
  if (n > 0) name += fmt::format("_{}", n);
  onnx::NodeProto* node = g_.add_node();
  node->set_name(name);
  node->set_op_type(op);
  for (const std::string& in : inputs) node->add_input(in);
  std::vector<std::string> names;
  for (int k = 0; k < outputs; ++k) {
    names.push_back(k == 0 ? name : fmt::format("{}:{}", name, k));
    node->add_output(names.back());
  }
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = node->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case Attr::Kind::Int:
        p->set_type(onnx::AttributeProto::INT);
        p->set_i(a.i);
        break;
      case Attr::Kind::Float:
        p->set_type(onnx::AttributeProto::FLOAT);
        p->set_f(a.f);
        break;
      case Attr::Kind::Ints:
        p->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
    }
  }
  return names;
}

std::string GraphBuilder::node(const std::string& scope, const std::string& op, const std::vector<std::string>& inputs,
                               const std::vector<Attr>& attrs, int outputs) {
  return node_outputs(scope, op, inputs, attrs, outputs)[0];
}

std::string GraphBuilder::layer_norm(const std::string& scope, const std::string& x, const nn::LayerNorm& ln,
                                     int axes) {
  VIT_CHECK(ln.weight.defined() && ln.bias.defined(), "export", "{}: a LayerNorm without affine parameters", scope);
  const std::string w = initializer(scope + ".weight", ln.weight.data());
  const std::string b = initializer(scope + ".bias", ln.bias.data());
  if (opset_ >= 17) {
    return node(scope, "LayerNormalization", {x, w, b},
                {attr("axis", static_cast<int64_t>(-axes)), attr_f("epsilon", static_cast<float>(ln.eps))});
  }
  const std::vector<int64_t> over = axes == 1 ? std::vector<int64_t>{-1} : std::vector<int64_t>{-2, -1};
  const std::string mean = node(scope, "ReduceMean", {x}, {attr("axes", over), attr("keepdims", int64_t{1})});
  const std::string centred = node(scope, "Sub", {x, mean});
  const std::string squared = node(scope, "Pow", {centred, scalar(2.0f)});
  const std::string var = node(scope, "ReduceMean", {squared}, {attr("axes", over), attr("keepdims", int64_t{1})});
  const std::string shifted = node(scope, "Add", {var, scalar(static_cast<float>(ln.eps))});
  const std::string root = node(scope, "Sqrt", {shifted});
  const std::string normed = node(scope, "Div", {centred, root});
  return node(scope, "Add", {node(scope, "Mul", {normed, w}), b});
}

std::string GraphBuilder::linear(const std::string& scope, const std::string& x, const nn::Linear& l) {
  const int64_t out = l.out_features;
  std::string y;
  if (!l.quantized()) {
    const Tensor wt = l.weight.data().contiguous().to(DType::F32).transpose(0, 1).contiguous();  // (in, out)
    y = node(scope, "MatMul", {x, initializer(scope + ".weight.T", wt)});
  } else {
    // quantize_dynamic's pattern (onnxruntime/python/tools/quantization/operators/matmul.py):
    // x -> DynamicQuantizeLinear -> (x_q uint8, x_scale, x_zero_point); MatMulInteger(x_q, W_q,
    // x_zero_point, w_zero_point) int32 -> Cast float -> Mul (x_scale * w_scale) -> y.
    const Tensor wq = l.weight.data().contiguous().transpose(0, 1).contiguous();  // (in, out) int8
    VIT_CHECK(wq.dtype() == DType::I8 && l.weight_scale.numel() == out, "export",
              "{}: an int8 Linear without one scale per output channel", scope);
    const std::string w = initializer(scope + ".weight_quantized", wq);
    const std::string w_scale = initializer(scope + ".weight_scale", l.weight_scale.contiguous().to(DType::F32));
    const std::string w_zero = initializer(scope + ".weight_zero_point", Tensor::zeros({out}, DType::I8));
    const std::vector<std::string> q = node_outputs(scope, "DynamicQuantizeLinear", {x}, {}, 3);
    const std::string acc = node(scope, "MatMulInteger", {q[0], w, q[2], w_zero});
    const std::string as_float = node(scope, "Cast", {acc}, {attr("to", int64_t{onnx::TensorProto::FLOAT})});
    const std::string scales = node(scope, "Mul", {q[1], w_scale});
    y = node(scope, "Mul", {as_float, scales});
  }
  if (!l.bias.defined()) return y;
  return node(scope, "Add", {y, initializer(scope + ".bias", l.bias.data())});
}

std::string GraphBuilder::gelu(const std::string& scope, const std::string& x) {
  // torch: x * 0.5 * (1 + erf(x / sqrt(2))), written Div, Erf, Add, Mul, Mul (ORT's GeluFusion pattern)
  const std::string e = node(scope, "Erf", {node(scope, "Div", {x, scalar(1.41421353816986083984375f)})});
  return node(scope, "Mul", {node(scope, "Mul", {x, node(scope, "Add", {e, scalar(1.0f)})}), scalar(0.5f)});
}

std::string GraphBuilder::gelu_tanh(const std::string& scope, const std::string& x) {
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  const std::string cube = node(scope, "Pow", {x, scalar(3.0f)});
  const std::string inner = node(scope, "Add", {x, node(scope, "Mul", {cube, scalar(0.044715f)})});
  const std::string t =
      node(scope, "Tanh", {node(scope, "Mul", {inner, scalar(static_cast<float>(std::sqrt(2.0 / M_PI)))})});
  return node(scope, "Mul", {node(scope, "Mul", {x, scalar(0.5f)}), node(scope, "Add", {t, scalar(1.0f)})});
}

std::string GraphBuilder::quick_gelu(const std::string& scope, const std::string& x) {
  // CLIP's x * sigmoid(1.702 x)
  return node(scope, "Mul", {x, node(scope, "Sigmoid", {node(scope, "Mul", {x, scalar(1.702f)})})});
}

}  // namespace vit::infer::onnx_export
