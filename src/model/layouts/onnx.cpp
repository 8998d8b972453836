// A ViT's sequence read from the ONNX graph's events (onnx_events.h), its weights named as timm's
// (see onnx.h).
#include "model/layouts/onnx.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/printable.h"
#include "core/shape.h"
#include "model/layouts/onnx_events.h"

namespace vit::model {
namespace {

using onnx_pattern::Event;
using onnx_pattern::Kind;

// The double a float32 attribute was written from, where a short decimal rounds to it (eps 1e-6
// is stored as 9.99999997e-07): the shortest such decimal, else the float's own value.
double decimal_of_float(double v) {
  for (int digits = 1; digits <= 9; ++digits) {
    const double d = std::stod(fmt::format("{:.{}g}", v, digits));
    if (static_cast<float>(d) == static_cast<float>(v)) return d;
  }
  return v;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Conv:
      return "a convolution";
    case Kind::Prefix:
      return "the prefix tokens' Concat";
    case Kind::Pos:
      return "the position table's Add";
    case Kind::Norm:
      return "a LayerNorm";
    case Kind::Linear:
      return "a Linear (MatMul/Gemm with a constant weight)";
    case Kind::Scale:
      return "a Mul/Div by a scalar";
    case Kind::Gamma:
      return "a LayerScale Mul";
    case Kind::Softmax:
      return "Softmax";
    case Kind::Act:
      return "an activation";
    case Kind::TakeRow:
      return "a token row's Gather";
    case Kind::Mean:
      return "a ReduceMean";
  }
  return "?";
}

// Reads the events in order, with messages naming where the sequence stopped being a ViT's.
struct Reader {
  const io::OnnxModel& m;
  const std::vector<Event>& ev;
  size_t at = 0;
  NamedTensors out;

  bool done() const { return at >= ev.size(); }
  bool next_is(Kind k) const { return !done() && ev[at].kind == k; }
  // Passes over scalar Muls/Divs (GELU's 1/sqrt(2) and 0.5).
  void skip_scalars() {
    while (next_is(Kind::Scale)) ++at;
  }
  [[noreturn]] void refuse(const std::string& expected) const {
    if (done())
      fail("onnx", "{}: the graph ends where {} was expected: not a ViT graph vit recognises", m.path, expected);
    fail("onnx", "{}: {} ({}) where {} was expected: not a ViT graph vit recognises", m.path, ev[at].label,
         kind_name(ev[at].kind), expected);
  }
  const Event& expect(Kind k, const std::string& what) {
    if (!next_is(k)) refuse(what);
    return ev[at++];
  }
  void put(const std::string& name, const Tensor& t) {
    if (t.defined()) out.emplace_back(name, t.to(DType::F32).contiguous());
  }
  void norm(const std::string& name, const Event& e) {
    VIT_CHECK(e.weight.defined(), "onnx", "{}: {}: a LayerNorm without its scale and bias", m.path, e.label);
    put(name + ".weight", e.weight);  // (D), or (N, D) for the notebook's token-wide norms
    put(name + ".bias", e.bias);
  }
  void linear(const std::string& name, const Event& e) {
    put(name + ".weight", e.weight);
    put(name + ".bias", e.bias);
  }
};

// Tensors stacked along rows as float32 (Hugging Face's q, k and v into timm's qkv; the prefix
// tokens): core's cat, which refuses parts of different widths.
Tensor stack_rows(const std::vector<Tensor>& parts) {
  std::vector<Tensor> f32;
  for (const Tensor& p : parts) f32.push_back(p.to(DType::F32));
  return cat(f32, 0);
}

Layout names_layout(const io::OnnxModel& m) {
  for (const auto& [name, _] : m.constants) {
    if (name.rfind("encoder.layers.", 0) == 0 || name == "class_token" || name.rfind("conv_proj.", 0) == 0)
      return Layout::Torchvision;
    if (name.rfind("vit.", 0) == 0 || name.rfind("embeddings.", 0) == 0) return Layout::HuggingFace;
  }
  return Layout::Timm;
}

}  // namespace

OnnxRecognised recognise_onnx_vit(const io::OnnxModel& m, const ViTConfig* known) {
  VIT_CHECK(m.inputs.size() == 1, "onnx", "{}: the graph has {} inputs; a ViT takes one image batch", m.path,
            m.inputs.size());
  const io::OnnxValue& input = m.inputs[0];
  VIT_CHECK(input.dims.size() == 4, "onnx", "{}: input '{}' has {} dims; a ViT takes (B, C, H, W)", m.path,
            printable(input.name), input.dims.size());
  const onnx_pattern::Events events = onnx_pattern::collect_events(m);
  Reader r{m, events.list, 0, {}};
  OnnxRecognised result;
  result.in_channels = input.dims[1] > 0 ? input.dims[1] : 0;
  result.image_size = input.dims[2] > 0 ? input.dims[2] : 0;
  // patch embedding, then the prefix and positions in either order (before: no_embed_class)
  const auto convs = std::count_if(r.ev.begin(), r.ev.end(), [](const Event& e) { return e.kind == Kind::Conv; });
  VIT_CHECK(convs <= 1, "onnx",
            "{}: {} convolutions before the tokens: a convolutional stem or hybrid backbone, which vit does not read "
            "from ONNX (load the checkpoint the model was exported from)",
            m.path, convs);
  const Event& patch = r.expect(Kind::Conv, "the patch embedding's Conv");
  VIT_CHECK(patch.stride == patch.weight.size(2) && patch.pad == 0, "onnx",
            "{}: {}: a {}x{} convolution of stride {} and padding {} is not a patch embedding", m.path, patch.label,
            patch.weight.size(2), patch.weight.size(3), patch.stride, patch.pad);
  r.put("patch_embed.proj.weight", patch.weight);
  r.put("patch_embed.proj.bias", patch.bias);
  const int64_t D = patch.weight.size(0);
  std::vector<Tensor> prefix;
  bool have_pos = false;  // (before the prefix: no_embed_class, which infer_config reads from the table's rows)
  while (r.next_is(Kind::Prefix) || r.next_is(Kind::Pos)) {
    const Event& e = r.ev[r.at++];
    if (e.kind == Kind::Pos) {
      VIT_CHECK(!have_pos && e.weight.size(2) == D, "onnx", "{}: {}: a second position table, or one of width {}",
                m.path, e.label, e.weight.size(2));
      r.put("pos_embed", e.weight);
      have_pos = true;
    } else {
      for (const Tensor& t : e.tokens) prefix.push_back(t.contiguous().view({-1, D}));
    }
  }
  VIT_CHECK(have_pos, "onnx", "{}: no position table (an Add of a (1, tokens, {}) constant) after the patch embedding",
            m.path, D);
  if (r.next_is(Kind::Norm) && r.at + 1 < r.ev.size() && r.ev[r.at + 1].kind == Kind::Norm) {
    r.norm("norm_pre", r.ev[r.at++]);
  }
  // blocks
  int64_t head_dim = 0, blocks = 0;
  std::string act;
  double eps = 0.0;
  while (true) {
    // a block starts with norm1 and reaches a Softmax before the next LayerNorm at block level
    size_t look = r.at + 1;
    while (look < r.ev.size() && r.ev[look].kind != Kind::Softmax && r.ev[look].kind != Kind::Mean &&
           r.ev[look].kind != Kind::TakeRow)
      ++look;
    if (!r.next_is(Kind::Norm) || look >= r.ev.size() || r.ev[look].kind != Kind::Softmax) break;
    const std::string b = fmt::format("blocks.{}.", blocks);
    const Event& norm1 = r.ev[r.at++];
    if (eps == 0.0) eps = norm1.value;
    r.norm(b + "norm1", norm1);
    std::vector<Tensor> qkv_w, qkv_b;
    double scale = 0.0;
    int qk_norms = 0;
    while (!r.next_is(Kind::Softmax)) {
      const Event& e = r.ev[r.at++];
      if (e.kind == Kind::Linear) {
        qkv_w.push_back(e.weight);
        if (e.bias.defined()) qkv_b.push_back(e.bias);
      } else if (e.kind == Kind::Scale) {
        VIT_CHECK(scale == 0.0, "onnx", "{}: {}: a second scale in block {}'s attention", m.path, e.label, blocks);
        scale = e.value;
      } else if (e.kind == Kind::Norm && qk_norms < 2) {
        r.norm(b + (qk_norms++ == 0 ? "attn.q_norm" : "attn.k_norm"), e);
      } else {
        r.at--;
        r.refuse(fmt::format("block {}'s attention (q/k/v projections, their scale, Softmax)", blocks));
      }
    }
    r.at++;  // Softmax
    VIT_CHECK(qkv_w.size() == 1 || qkv_w.size() == 3, "onnx",
              "{}: block {}'s attention has {} projections before its Softmax (1: qkv, or 3: query, key, value)",
              m.path, blocks, qkv_w.size());
    VIT_CHECK(qkv_b.empty() || qkv_b.size() == qkv_w.size(), "onnx", "{}: block {}: some of q, k, v without a bias",
              m.path, blocks);
    for (const Tensor& w : qkv_w) {
      VIT_CHECK(w.size(1) == qkv_w[0].size(1), "onnx",
                "{}: block {}'s query, key and value projections read inputs of different widths ({} and {})", m.path,
                blocks, qkv_w[0].size(1), w.size(1));
    }
    VIT_CHECK(scale > 0.0, "onnx",
              "{}: block {}'s attention has no scale (a Mul or Div by a scalar before its Softmax): its head width "
              "cannot be told",
              m.path, blocks);
    const double width = 1.0 / (scale * scale);
    const auto hd = static_cast<int64_t>(std::llround(width));
    VIT_CHECK(hd >= 1 && std::abs(width - static_cast<double>(hd)) < 1e-3 * width, "onnx",
              "{}: block {}'s attention scale {} is not 1/sqrt of a head width", m.path, blocks, scale);
    VIT_CHECK(head_dim == 0 || head_dim == hd, "onnx", "{}: block {} has heads {} wide, the first block {}", m.path,
              blocks, hd, head_dim);
    head_dim = hd;
    r.put(b + "attn.qkv.weight", qkv_w.size() == 1 ? qkv_w[0] : stack_rows(qkv_w));
    if (!qkv_b.empty()) r.put(b + "attn.qkv.bias", qkv_b.size() == 1 ? qkv_b[0] : stack_rows(qkv_b));
    r.linear(b + "attn.proj", r.expect(Kind::Linear, fmt::format("block {}'s attention projection", blocks)));
    if (r.next_is(Kind::Gamma)) r.put(b + "ls1.gamma", r.ev[r.at++].weight);
    r.norm(b + "norm2", r.expect(Kind::Norm, fmt::format("block {}'s second LayerNorm", blocks)));
    r.linear(b + "mlp.fc1", r.expect(Kind::Linear, fmt::format("block {}'s MLP", blocks)));
    r.skip_scalars();
    if (r.next_is(Kind::Act)) {
      const std::string a = r.ev[r.at++].act;
      const std::string name = a == "tanh" ? "gelu_tanh" : a;
      VIT_CHECK(act.empty() || act == name, "onnx", "{}: block {}'s MLP activation {} differs from the first's {}",
                m.path, blocks, name, act);
      act = name;
      r.skip_scalars();
      r.linear(b + "mlp.fc2", r.expect(Kind::Linear, fmt::format("block {}'s MLP second Linear", blocks)));
    }
    if (r.next_is(Kind::Gamma)) r.put(b + "ls2.gamma", r.ev[r.at++].weight);
    ++blocks;
  }
  VIT_CHECK(blocks > 0, "onnx", "{}: no encoder block (LayerNorm, projections, Softmax) after the embeddings", m.path);
  // the pooling: the class row(s) or the token mean, with the final norm before or after it (torch
  // normalises every token, then takes the row; vit export takes the rows, then normalises them) and
  // fc_norm after it; the same LayerNorm met again (a DeiT's second row) is the same one.
  std::vector<int64_t> rows;
  bool mean = false;
  std::vector<std::vector<std::string>> norms_seen;
  int norm_before_mean = 0, norm_after_mean = 0;
  while (r.next_is(Kind::TakeRow) || r.next_is(Kind::Mean) || r.next_is(Kind::Norm) || r.next_is(Kind::Scale)) {
    const Event& e = r.ev[r.at++];
    if (e.kind == Kind::Mean) {
      mean = true;
    } else if (e.kind == Kind::TakeRow) {
      rows.push_back(e.index);
    } else if (e.kind == Kind::Norm) {
      if (std::find(norms_seen.begin(), norms_seen.end(), e.names) != norms_seen.end()) continue;
      norms_seen.push_back(e.names);
      VIT_CHECK(norms_seen.size() <= 2, "onnx", "{}: {}: a third LayerNorm after the blocks", m.path, e.label);
      const bool fc = mean ? true : norms_seen.size() == 2;
      VIT_CHECK(!(fc && mean && norm_after_mean > 0), "onnx", "{}: {}: two LayerNorms after the token mean", m.path,
                e.label);
      (mean ? norm_after_mean : norm_before_mean) += 1;
      r.norm(fc ? "fc_norm" : "norm", e);
    }
  }
  VIT_CHECK(mean || !rows.empty(), "onnx",
            "{}: after block {} neither the class row is taken nor the tokens averaged: not a ViT classifier vit "
            "recognises",
            m.path, blocks - 1);
  VIT_CHECK(!mean || norm_before_mean == 0 || norm_after_mean > 0, "onnx",
            "{}: the tokens are normalised, then averaged, with no LayerNorm after the mean (timm's global_pool='avg' "
            "without fc_norm): not a pooling vit runs",
            m.path);
  r.skip_scalars();
  std::vector<const Event*> heads;
  // timm's distilled head takes the distillation row after the class head ran: a row between heads
  while (r.next_is(Kind::Linear) || (r.next_is(Kind::TakeRow) && heads.size() == 1)) {
    if (r.next_is(Kind::TakeRow)) {
      rows.push_back(r.ev[r.at++].index);
      r.skip_scalars();
      continue;
    }
    heads.push_back(&r.ev[r.at++]);
    r.skip_scalars();
    if (r.next_is(Kind::Act) && r.ev[r.at].act == "tanh" && heads.size() == 1 && r.at + 1 < r.ev.size() &&
        r.ev[r.at + 1].kind == Kind::Linear) {
      ++r.at;
      r.linear("pre_logits.fc", *heads.back());
      heads.pop_back();
    }
  }
  if (!heads.empty() && r.next_is(Kind::Act) && r.ev[r.at].act == "tanh") {  // the notebook's tanh(head(x))
    ++r.at;
    result.head_tanh = true;
  }
  VIT_CHECK(heads.size() <= 2, "onnx", "{}: {} Linears after the pooling", m.path, heads.size());
  if (!heads.empty()) r.linear("head", *heads[0]);
  const bool distilled = heads.size() == 2;
  // the rows taken: the class row, and a distilled model's distillation row (in that order)
  const std::vector<int64_t> want_rows = mean        ? std::vector<int64_t>{}
                                         : distilled ? std::vector<int64_t>{0, 1}
                                                     : std::vector<int64_t>{0};
  VIT_CHECK(rows == want_rows || (distilled && mean), "onnx",
            "{}: the head reads token rows [{}]; a ViT's reads [{}] (the class row{})", m.path, fmt::join(rows, ", "),
            fmt::join(want_rows, ", "), distilled ? " and the distillation row" : "");
  if (distilled) r.linear("head_dist", *heads[1]);
  r.skip_scalars();
  if (!r.done()) r.refuse("the end of the graph after the head");
  // the prefix rows: [cls] [dist] [reg x R]
  if (!prefix.empty()) {
    const Tensor rows_all = stack_rows(prefix);  // (R, D)
    int64_t k = 0;
    const auto take = [&](const std::string& name, int64_t count) {
      r.put(name, rows_all.slice(0, k, k + count).contiguous().view({1, count, D}));
      k += count;
    };
    // vit export records the counts; a torch export's are told by the pooling and the heads
    const bool cls = known != nullptr ? known->class_token() : !mean;
    const bool dist = known != nullptr ? known->dist_token : distilled;
    if (cls) take("cls_token", 1);
    if (dist) take("dist_token", 1);
    if (k < rows_all.size(0)) take("reg_token", rows_all.size(0) - k);
  }
  // every constant weight must have found its place
  for (const auto& [name, t] : m.constants) {
    if (t.dtype() != DType::F32 || t.numel() <= 1 || events.used.count(name)) continue;
    bool read = false;
    for (const io::OnnxNode& n : m.nodes)
      for (const std::string& in : n.inputs) read = read || in == name;
    if (!read) continue;  // an initializer no node reads
    fail("onnx", "{}: constant '{}' {} is used by the graph but is no weight of the ViT pattern vit recognises", m.path,
         printable(name), shape_str(t.shape()));
  }
  result.converted.weights = std::move(r.out);
  result.converted.eps = decimal_of_float(eps);
  result.converted.act = act.empty() ? "gelu" : act;
  result.converted.num_heads = 0;
  result.converted.family = distilled ? Family::Deit : Family::Vit;
  result.layout = names_layout(m);
  result.blocks = blocks;
  result.summary = fmt::format("opset {}, {} blocks, heads {} wide, {}, eps {:g}", m.opset, blocks, head_dim,
                               result.converted.act, eps);
  // the head count from the head width
  for (const auto& [name, t] : result.converted.weights) {
    if (name == "blocks.0.attn.qkv.weight") result.converted.num_heads = t.size(0) / 3 / head_dim;
  }
  return result;
}

}  // namespace vit::model
