// The parametric ops of an ONNX graph as events (see onnx_events.h).
#include "model/layouts/onnx_events.h"

#include <cmath>

#include "core/check.h"
#include "core/printable.h"

namespace vit::model::onnx_pattern {
namespace {

// Ops a ViT graph holds besides the parametric ones: shape arithmetic and data movement.
const std::set<std::string> kPlumbing = {
    "Reshape",  "Transpose", "Gather",   "Shape",           "Concat", "Unsqueeze", "Squeeze", "Slice", "Flatten",
    "Identity", "Cast",      "Constant", "ConstantOfShape", "Expand", "Split",     "Equal",   "Where", "Range",
    "Sqrt",     "Pow",       "Sub",      "Floor",           "Tile",   "Dropout"};
// Ops whose output is a constant when their input is (folded here: torch's unfolded exports
// transpose their weights at run time).
const std::set<std::string> kFoldable = {"Transpose", "Identity", "Cast"};

struct Graph {
  const io::OnnxModel& m;
  std::map<std::string, Tensor> consts;
  std::map<std::string, std::string> origin;  // a constant's initializer name (through folds)
  std::map<std::string, size_t> producer;
  std::map<std::string, std::vector<size_t>> consumers;
  std::set<size_t> skip;  // nodes folded or taken by an event already

  const Tensor* cst(const std::string& name) const {
    auto it = consts.find(name);
    return it == consts.end() ? nullptr : &it->second;
  }
  const io::OnnxNode* made_by(const std::string& value, const char* op) const {
    auto it = producer.find(value);
    if (it == producer.end()) return nullptr;
    const io::OnnxNode& n = m.nodes[it->second];
    return n.op_type == op ? &n : nullptr;
  }
  // The one node reading `value`, if it is `op`.
  const io::OnnxNode* sole_consumer(const std::string& value, const char* op, size_t* index) const {
    auto it = consumers.find(value);
    if (it == consumers.end() || it->second.size() != 1) return nullptr;
    const io::OnnxNode& n = m.nodes[it->second[0]];
    if (n.op_type != op) return nullptr;
    *index = it->second[0];
    return &n;
  }
  // The constant among a binary node's inputs (and the other input), or nullptr.
  const Tensor* const_operand(const io::OnnxNode& n, std::string* name, std::string* other = nullptr) const {
    if (n.inputs.size() != 2) return nullptr;
    for (int k = 0; k < 2; ++k) {
      const Tensor* t = cst(n.inputs[k]);
      if (t != nullptr && cst(n.inputs[1 - k]) == nullptr) {
        *name = n.inputs[k];
        if (other != nullptr) *other = n.inputs[1 - k];
        return t;
      }
    }
    return nullptr;
  }
  std::string source(const std::string& value) const {
    auto it = origin.find(value);
    return it == origin.end() ? value : it->second;
  }
};

// A node's k-th input ("" when it has fewer: malformed graphs are refused by what follows).
const std::string& input(const io::OnnxNode& n, size_t k) {
  static const std::string none;
  return k < n.inputs.size() ? n.inputs[k] : none;
}

int64_t int_attr(const io::OnnxNode& n, const char* name, int64_t fallback) {
  const io::OnnxAttribute* a = n.attribute(name);
  return a != nullptr && a->kind == io::OnnxAttribute::Kind::Int ? a->i : fallback;
}

Tensor fold(const io::OnnxNode& n, const Tensor& in) {
  if (n.op_type != "Transpose") return in;
  std::vector<int64_t> perm;
  if (const io::OnnxAttribute* a = n.attribute("perm"); a != nullptr) perm = a->ints;
  if (perm.empty())
    for (int64_t d = in.dim() - 1; d >= 0; --d) perm.push_back(d);
  return in.permute(perm).contiguous();
}

double scalar_of(const Tensor& t) {
  const Tensor f = t.to(DType::F32).contiguous();
  return f.data<float>()[0];
}

// The LayerNorm decompositions torch writes below opset 17, found at their Div.
void find_decomposed_norms(Graph& g, std::map<size_t, Event>& at) {
  const auto& nodes = g.m.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const io::OnnxNode& div = nodes[i];
    if (div.op_type != "Div" || div.inputs.size() != 2) continue;
    const io::OnnxNode* sqrt = g.made_by(div.inputs[1], "Sqrt");
    const io::OnnxNode* sub = g.made_by(div.inputs[0], "Sub");
    if (sqrt == nullptr || sub == nullptr) continue;
    const io::OnnxNode* add = g.made_by(input(*sqrt, 0), "Add");
    if (add == nullptr) continue;
    std::string eps_name, var_value;
    const Tensor* eps = g.const_operand(*add, &eps_name, &var_value);
    const io::OnnxNode* var = g.made_by(var_value, "ReduceMean");
    const io::OnnxNode* mean = sub->inputs.size() == 2 ? g.made_by(sub->inputs[1], "ReduceMean") : nullptr;
    if (eps == nullptr || eps->numel() != 1 || var == nullptr || mean == nullptr) continue;
    const io::OnnxAttribute* axes = mean->attribute("axes");
    Event e{Kind::Norm, div.label};
    e.value = scalar_of(*eps);
    e.axes = axes != nullptr ? static_cast<int64_t>(axes->ints.size()) : 1;
    for (const io::OnnxNode* part : {sqrt, sub, add, var, mean}) g.skip.insert(g.producer[part->outputs[0]]);
    if (const io::OnnxNode* pow = g.made_by(input(*var, 0), "Pow")) g.skip.insert(g.producer[pow->outputs[0]]);
    g.skip.insert(i);
    size_t mul_at = 0, add_at = 0;
    const io::OnnxNode* mul = g.sole_consumer(div.outputs[0], "Mul", &mul_at);
    std::string w_name, b_name;
    const Tensor* w = mul != nullptr ? g.const_operand(*mul, &w_name) : nullptr;
    const io::OnnxNode* bias_add = w != nullptr ? g.sole_consumer(mul->outputs[0], "Add", &add_at) : nullptr;
    const Tensor* b = bias_add != nullptr ? g.const_operand(*bias_add, &b_name) : nullptr;
    if (b != nullptr) {
      e.weight = *w;
      e.bias = *b;
      e.names = {g.source(w_name), g.source(b_name)};
      g.skip.insert(mul_at);
      g.skip.insert(add_at);
    }
    at.insert_or_assign(i, e);
  }
}

}  // namespace

Events collect_events(const io::OnnxModel& m) {
  Graph g{m, {}, {}, {}, {}, {}};
  for (const auto& [name, t] : m.constants) g.consts[name] = t;
  const auto& nodes = m.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const io::OnnxNode& n = nodes[i];
    VIT_CHECK(n.domain.empty() || n.domain == "ai.onnx", "onnx", "{}: {} is in domain '{}': not a ViT graph vit reads",
              m.path, n.label, printable(n.domain));
    VIT_CHECK(!n.outputs.empty() && !n.outputs[0].empty(), "onnx", "{}: {} has no output", m.path, n.label);
    for (const std::string& out : n.outputs) g.producer[out] = i;
    for (const std::string& in : n.inputs) g.consumers[in].push_back(i);
    if (kFoldable.count(n.op_type) && n.inputs.size() == 1 && g.cst(n.inputs[0]) != nullptr) {
      g.consts[n.outputs[0]] = fold(n, *g.cst(n.inputs[0]));
      g.origin[n.outputs[0]] = g.source(n.inputs[0]);
      g.skip.insert(i);
    }
  }
  std::map<size_t, Event> norms;
  find_decomposed_norms(g, norms);
  Events out;
  const auto take = [&](Event e) {
    for (const std::string& name : e.names) out.used.insert(name);
    out.list.push_back(std::move(e));
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto it = norms.find(i); it != norms.end()) take(it->second);
    if (g.skip.count(i)) continue;
    const io::OnnxNode& n = nodes[i];
    const std::string& op = n.op_type;
    std::string c_name, other;
    if (op == "Conv") {
      const Tensor* w = n.inputs.size() >= 2 ? g.cst(n.inputs[1]) : nullptr;
      VIT_CHECK(w != nullptr && w->dim() == 4, "onnx", "{}: {} has no constant 4-d weight", m.path, n.label);
      VIT_CHECK(int_attr(n, "group", 1) == 1, "onnx", "{}: {}: grouped convolutions are not part of a ViT", m.path,
                n.label);
      Event e{Kind::Conv, n.label};
      e.weight = *w;
      e.names.push_back(g.source(n.inputs[1]));
      if (n.inputs.size() >= 3 && !n.inputs[2].empty()) {
        const Tensor* b = g.cst(n.inputs[2]);
        VIT_CHECK(b != nullptr, "onnx", "{}: {}: its bias is not a constant", m.path, n.label);
        e.bias = *b;
        e.names.push_back(g.source(n.inputs[2]));
      }
      const io::OnnxAttribute* strides = n.attribute("strides");
      const io::OnnxAttribute* pads = n.attribute("pads");
      e.stride = strides != nullptr && !strides->ints.empty() ? strides->ints[0] : 1;
      e.pad = pads != nullptr && !pads->ints.empty() ? pads->ints[0] : 0;
      take(e);
    } else if (op == "LayerNormalization") {
      Event e{Kind::Norm, n.label};
      const Tensor* w = n.inputs.size() >= 2 ? g.cst(n.inputs[1]) : nullptr;
      const Tensor* b = n.inputs.size() >= 3 ? g.cst(n.inputs[2]) : nullptr;
      VIT_CHECK(w != nullptr && b != nullptr, "onnx", "{}: {}: a LayerNorm without constant scale and bias", m.path,
                n.label);
      e.weight = *w;
      e.bias = *b;
      e.names = {g.source(n.inputs[1]), g.source(n.inputs[2])};
      const io::OnnxAttribute* eps = n.attribute("epsilon");
      e.value = eps != nullptr ? eps->f : 1e-5;
      e.axes = -int_attr(n, "axis", -1);
      take(e);
    } else if (op == "MatMul" || op == "Gemm") {
      const Tensor* b = n.inputs.size() >= 2 ? g.cst(n.inputs[1]) : nullptr;
      if (b == nullptr) continue;  // activations times activations: the attention's
      VIT_CHECK(b->dim() == 2, "onnx", "{}: {}: a constant weight of {} dims", m.path, n.label, b->dim());
      Event e{Kind::Linear, n.label};
      const bool transposed = op == "Gemm" && int_attr(n, "transB", 0) == 1;
      VIT_CHECK(op == "MatMul" || int_attr(n, "transA", 0) == 0, "onnx", "{}: {}: Gemm with transA", m.path, n.label);
      e.weight = transposed ? *b : b->transpose(0, 1).contiguous();  // (out, in)
      e.names.push_back(g.source(n.inputs[1]));
      const int64_t width = e.weight.size(0);
      if (op == "Gemm" && n.inputs.size() >= 3 && !n.inputs[2].empty()) {
        const Tensor* c = g.cst(n.inputs[2]);
        VIT_CHECK(c != nullptr && c->numel() == width, "onnx", "{}: {}: its bias is not a constant of {} values",
                  m.path, n.label, width);
        e.bias = c->contiguous().view({width});
        e.names.push_back(g.source(n.inputs[2]));
      } else if (size_t at = 0; const io::OnnxNode* add = g.sole_consumer(n.outputs[0], "Add", &at)) {
        const Tensor* c = g.const_operand(*add, &c_name);
        if (c != nullptr && c->numel() == width && c->dim() == 1) {
          e.bias = *c;
          e.names.push_back(g.source(c_name));
          g.skip.insert(at);
        }
      }
      take(e);
    } else if (op == "Add" || op == "Mul" || op == "Div") {
      const Tensor* c = g.const_operand(n, &c_name);
      if (c == nullptr || c->dtype() != DType::F32) continue;
      Event e{Kind::Scale, n.label};
      e.names.push_back(g.source(c_name));
      if (c->numel() == 1) {
        if (op == "Add") continue;
        e.value = op == "Mul" ? scalar_of(*c) : 1.0 / scalar_of(*c);
        take(e);
      } else if (op == "Add" && c->dim() == 3) {
        e.kind = Kind::Pos;
        e.weight = *c;
        take(e);
      } else if (op == "Mul" && c->numel() == c->size(-1)) {
        e.kind = Kind::Gamma;
        e.weight = c->contiguous().view({c->numel()});
        take(e);
      }  // other constants stay unused, and are named by the check that every weight was used
    } else if (op == "Concat") {
      Event e{Kind::Prefix, n.label};
      for (const std::string& in : n.inputs) {
        std::string v = in;
        // through the ops that broadcast a token to the batch
        while (!g.cst(v) && g.producer.count(v)) {
          const io::OnnxNode& p = nodes[g.producer[v]];
          if (p.op_type != "Expand" && p.op_type != "Tile" && p.op_type != "Unsqueeze" && p.op_type != "Reshape" &&
              p.op_type != "Identity")
            break;
          v = input(p, 0);
        }
        const Tensor* t = g.cst(v);
        if (t != nullptr && t->dtype() == DType::F32 && t->numel() > 1) {
          e.tokens.push_back(*t);
          e.names.push_back(g.source(v));
        }
      }
      if (!e.tokens.empty()) take(e);
    } else if (op == "Softmax") {
      take(Event{Kind::Softmax, n.label});
    } else if (op == "Erf" || op == "Tanh" || op == "Sigmoid" || op == "Relu") {
      Event e{Kind::Act, n.label};
      e.act = op == "Erf" ? "gelu" : op == "Tanh" ? "tanh" : op == "Sigmoid" ? "quick_gelu" : "relu";
      take(e);
    } else if (op == "ReduceMean") {
      take(Event{Kind::Mean, n.label});
    } else if (op == "Gather" && int_attr(n, "axis", 0) == 1 && n.inputs.size() == 2) {
      const Tensor* index = g.cst(n.inputs[1]);
      if (index == nullptr || index->numel() != 1 || g.cst(n.inputs[0]) != nullptr) continue;
      Event e{Kind::TakeRow, n.label};
      e.index = index->dtype() == DType::I64 ? index->data<int64_t>()[0] : 0;
      take(e);
    } else if (!kPlumbing.count(op)) {
      fail("onnx", "{}: {}: op '{}' is not part of a ViT graph vit recognises{}", m.path, n.label, printable(op),
           op == "MatMulInteger" || op == "DynamicQuantizeLinear" || op == "QLinearMatMul"
               ? " (an int8 ONNX model: give vit the float32 one; `vit quantize` makes int8 weights from it)"
               : "");
    }
  }
  return out;
}

}  // namespace vit::model::onnx_pattern
