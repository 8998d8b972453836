// Resolving a VisionTransformer into the session's weight structs (see session_weights.h).
#include "infer/session_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <map>

#include "kernels/gemm/bf16_gemm.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"

namespace vit::infer {
namespace {

// Drops the whole pages inside [p, p + bytes) from this process (see inference.h).
void release_pages(const void* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Packs each weight once (a weight reached twice shares its packing), and resolves every other
// parameter to the pointer the session reads: the model's own memory, or (owning) a copy of a
// memory-mapped one.
class Packer {
 public:
  Packer(bool release, bool own, bool bf16, std::vector<std::unique_ptr<float[]>>& owned)
      : release_(release || own), own_(own), bf16_(bf16), simd_(kernels::packed_gemm_supported()), owned_(owned) {}

  // The parameter's floats as the session reads them (null for an absent one).
  const float* ptr(const Variable& v) {
    if (!v.defined()) return nullptr;
    const Tensor& t = v.data();
    if (!own_ || !t.is_file_mapped()) return t.data<float>();
    VIT_CHECK(t.is_contiguous() && t.dtype() == DType::F32, "inference", "parameter {} is not contiguous float32",
              shape_str(t.shape()));
    auto it = copies_.find(t.data<float>());
    if (it != copies_.end()) return it->second;
    owned_.push_back(std::make_unique<float[]>(static_cast<size_t>(t.numel())));
    std::copy(t.data<float>(), t.data<float>() + t.numel(), owned_.back().get());
    return copies_[t.data<float>()] = owned_.back().get();
  }

  LinearWeights matrix(const Variable& weight, const Variable& bias, int64_t out, int64_t in) {
    LinearWeights l;
    l.in = in;
    l.out = out;
    l.bias = ptr(bias);
    if (bf16_) {  // converted once; the float32 original is then not read again
      const float* w = weight.data().data<float>();
      const int64_t big = kernels::bf16_overflow_index(w, out * in);
      VIT_CHECK(big < 0, "inference",
                "a ({}, {}) weight holds {:g} at ({}, {}), past bfloat16's largest finite value 3.3895e38: in bf16 "
                "it would become infinity; run this model in float32",
                out, in, w[big < 0 ? 0 : big], big / in, big % in);
      l.bf16 = pack_once(bf16_matrices_, weight, out, in);
      return l;
    }
    if (!simd_) {  // float weights are packed only where the kernel runs: read in place (or a copy)
      l.weight = ptr(weight);
      return l;
    }
    l.packed = pack_once(float_, weight, out, in);
    return l;
  }

  // A float32 weight (out, in) in a kernel's packed form (kernels::PackedMatrix or Bf16Matrix), made
  // once per weight; its mapped pages are then dropped (release).
  template <class Matrix>
  std::shared_ptr<const Matrix> pack_once(std::map<const float*, std::shared_ptr<const Matrix>>& made,
                                          const Variable& weight, int64_t out, int64_t in) {
    const float* source = weight.data().data<float>();
    auto& packed = made[source];
    if (!packed) {
      packed = std::make_shared<const Matrix>(Matrix::from_weight(source, out, in));
      if (release_ && weight.data().is_file_mapped()) {
        release_pages(source, static_cast<size_t>(out * in) * sizeof(float));
      }
    }
    return packed;
  }

  LinearWeights linear(const nn::Linear& layer) {
    if (!layer.quantized()) return matrix(layer.weight, layer.bias, layer.out_features, layer.in_features);
    LinearWeights l;
    l.in = layer.in_features;
    l.out = layer.out_features;
    l.bias = ptr(layer.bias);
    const Tensor& q = layer.weight.data();
    VIT_CHECK(q.is_contiguous() && layer.weight_scale.is_contiguous() && layer.weight_scale.dtype() == DType::F32,
              "inference", "int8 weight {} with scale {}: not contiguous or not float32", shape_str(q.shape()),
              shape_str(layer.weight_scale.shape()));
    auto& packed = int8_[&layer];
    if (!packed) {
      packed = std::make_shared<const kernels::Int8Matrix>(
          kernels::Int8Matrix::from_quantized(q.data<int8_t>(), layer.weight_scale.data<float>(), layer.out_features,
                                              layer.in_features, layer.weight_bits));
      if (release_ && q.is_file_mapped()) release_pages(q.data<int8_t>(), static_cast<size_t>(q.numel()));
    }
    l.int8 = packed;
    return l;
  }

 private:
  bool release_, own_, bf16_, simd_;
  std::map<const float*, std::shared_ptr<const kernels::Bf16Matrix>> bf16_matrices_;
  std::vector<std::unique_ptr<float[]>>& owned_;
  std::map<const float*, const float*> copies_;  // a mapped parameter's copy, made once
  std::map<const float*, std::shared_ptr<const kernels::PackedMatrix>> float_;
  std::map<const nn::Linear*, std::shared_ptr<const kernels::Int8Matrix>> int8_;
};

NormWeights norm_of(const std::shared_ptr<nn::LayerNorm>& ln, Packer& packer) {
  if (!ln) return {};
  return {packer.ptr(ln->weight), packer.ptr(ln->bias), ln->eps, true};
}

MlpActivation mlp_activation(const nn::Mlp& mlp) {
  switch (mlp.activation) {
    case nn::ActivationKind::Gelu:
      return MlpActivation::Gelu;
    case nn::ActivationKind::GeluTanh:
      return MlpActivation::GeluTanh;
    case nn::ActivationKind::QuickGelu:
      return MlpActivation::QuickGelu;
    case nn::ActivationKind::Relu:
      return MlpActivation::Relu;
  }
  fail("inference", "MLP activation kind {}", static_cast<int>(mlp.activation));
}

LayerWeights layer(const std::string& name, const nn::Module& module, Packer& packer) {
  const auto* block = dynamic_cast<const nn::EncoderBlock*>(&module);
  VIT_CHECK(block != nullptr, "inference", "blocks.{} is not an encoder block", name);
  LayerWeights w;
  const nn::MultiHeadSelfAttention& a = *block->attn;
  w.norm1 = norm_of(block->norm1, packer);
  w.norm2 = norm_of(block->norm2, packer);
  w.q_norm = norm_of(a.q_norm, packer);
  w.k_norm = norm_of(a.k_norm, packer);
  w.qkv = packer.linear(*a.qkv);
  w.proj = packer.linear(*a.proj);
  const nn::Mlp& mlp = *block->mlp;
  w.fc1 = packer.linear(*mlp.fc1);
  if (mlp.fc2) {
    w.fc2 = packer.linear(*mlp.fc2);
    w.activation = mlp_activation(mlp);
  }
  if (block->ls1) w.ls1 = packer.ptr(block->ls1->gamma);
  if (block->ls2) w.ls2 = packer.ptr(block->ls2->gamma);
  return w;
}

// The stem's layers, checked: Conv2d(3x3, stride 1, padding 1) then GELU, stem_layers times.
std::vector<StemLayerWeights> stem_of(const model::VisionTransformer& model, Packer& packer) {
  std::vector<StemLayerWeights> layers;
  if (!model.stem) return layers;
  const auto children = model.stem->named_children();
  VIT_CHECK(children.size() % 2 == 0, "inference", "the stem has {} layers, not (conv, GELU) pairs", children.size());
  for (size_t i = 0; i < children.size(); i += 2) {
    const auto* conv = dynamic_cast<const nn::Conv2d*>(children[i].second.get());
    const auto* gelu = dynamic_cast<const nn::GELU*>(children[i + 1].second.get());
    VIT_CHECK(conv && gelu && conv->kernel_size == 3 && conv->stride == 1 && conv->padding == 1 && conv->bias.defined(),
              "inference", "stem.{} is not a 3x3 convolution (stride 1, padding 1, bias) followed by GELU", i);
    StemLayerWeights s;
    s.conv = packer.matrix(conv->weight, conv->bias, conv->out_channels, conv->in_channels * 9);
    s.in_channels = conv->in_channels;
    s.out_channels = conv->out_channels;
    s.epilogue = gelu->tanh_approximation ? kernels::Epilogue::GeluTanh : kernels::Epilogue::Gelu;
    layers.push_back(std::move(s));
  }
  return layers;
}

// A convolution's weight (out, in, k, k) with the BatchNorm after it folded in (see ConvWeights),
// as a GEMM matrix (out, k k in) in (c, kh, kw) order, or (channels_last) (kh, kw, c) order.
ConvWeights fold_conv_bn(const nn::Conv2d& conv, const nn::BatchNorm2d& bn, bool channels_last, Packer& packer,
                         std::vector<Tensor>& keep) {
  const int64_t O = conv.out_channels, C = conv.in_channels, K = conv.kernel_size, L = C * K * K;
  const model::FoldedConv f = model::fold_conv_bn(conv, bn);  // (O, C, K, K), (O)
  const Tensor bias = f.bias;
  Tensor folded = channels_last ? f.weight.permute({0, 2, 3, 1}).contiguous().view({O, L}) : f.weight.view({O, L});
  keep.push_back(folded);
  keep.push_back(bias);
  ConvWeights cw;
  cw.gemm = packer.matrix(Variable(folded), Variable(bias), O, L);
  if (!cw.gemm.bf16 && !cw.gemm.int8) {  // float32: the direct convolution reads (O, KH, KW, C)
    Tensor direct = channels_last ? folded : folded.view({O, C, K, K}).permute({0, 2, 3, 1}).contiguous();
    keep.push_back(direct);
    cw.direct = direct.data<float>();
  }
  cw.in_channels = C;
  cw.out_channels = O;
  cw.kernel = K;
  cw.stride = conv.stride;
  return cw;
}

BackboneWeights backbone_of(const model::VisionTransformer& model, Packer& packer, std::vector<Tensor>& keep) {
  BackboneWeights b;
  if (!model.backbone) return b;
  b.stem = fold_conv_bn(*model.backbone->stem->conv, *model.backbone->stem->bn, false, packer, keep);
  for (const auto& [s, stage] : model.backbone->stages->named_children()) {
    for (const auto& [i, child] : stage->named_children()) {
      const auto* block = dynamic_cast<const model::BasicBlock*>(child.get());
      VIT_CHECK(block != nullptr, "inference", "backbone.stages.{}.{} is not a residual block", s, i);
      ConvBlockWeights w;
      w.conv1 = fold_conv_bn(*block->conv1, *block->bn1, true, packer, keep);
      w.conv2 = fold_conv_bn(*block->conv2, *block->bn2, true, packer, keep);
      if (block->downsample)
        w.downsample = fold_conv_bn(*block->downsample->conv, *block->downsample->bn, true, packer, keep);
      b.blocks.push_back(std::move(w));
    }
  }
  return b;
}

// A hybrid's patch projection (D, C, P, P) permuted to (D, P, P, C): it reads the channels-last map.
LinearWeights channels_last_patch(const nn::Conv2d& proj, Packer& packer, std::vector<Tensor>& keep) {
  const Tensor w = proj.weight.data().permute({0, 2, 3, 1}).contiguous();
  keep.push_back(w);
  return packer.matrix(Variable(w), proj.bias, proj.out_channels,
                       proj.in_channels * proj.kernel_size * proj.kernel_size);
}

}  // namespace

void LinearWeights::forward(const float* x, int64_t rows, float* y, const kernels::Epilogue& epilogue) const {
  if (int8) {
    kernels::linear_int8(x, rows, in, in, *int8, bias, y, out, epilogue);
  } else if (bf16) {
    kernels::linear_bf16(x, rows, in, in, *bf16, bias, y, out, epilogue);
  } else if (packed) {
    kernels::linear_forward_packed(x, rows, in, in, *packed, bias, y, out, epilogue);
  } else {
    kernels::linear_forward<float>(x, rows, in, in, weight, out, bias, y, out, epilogue);
  }
}

void NormWeights::forward(const float* x, float* y, int64_t rows, int64_t n) const {
  kernels::layernorm_forward<float>(x, weight, bias, y, nullptr, nullptr, rows, n, eps);
}

SessionWeights::SessionWeights(const model::VisionTransformer& model, bool release, bool own, bool bf16) {
  const model::ViTConfig& c = model.config();
  Packer packer(release, own, bf16, owned);
  auto ptr = [&packer](const Variable& v) { return packer.ptr(v); };
  stem = stem_of(model, packer);
  backbone = backbone_of(model, packer, folded);
  const nn::Conv2d& proj = *model.patch_embed->proj;
  patch = backbone
              ? channels_last_patch(proj, packer, folded)
              : packer.matrix(proj.weight, proj.bias, c.dim, c.embed_channels() * c.embed_patch() * c.embed_patch());
  if (model.cls_token.defined()) prefix_rows.push_back(ptr(model.cls_token));
  dist_token = model.dist_token.defined();
  if (dist_token) prefix_rows.push_back(ptr(model.dist_token));
  for (int64_t r = 0; r < c.reg_tokens; ++r) prefix_rows.push_back(ptr(model.reg_token) + r * c.dim);
  pos = ptr(model.pos_embed);
  norm_pre = norm_of(model.norm_pre, packer);
  for (const auto& [name, child] : model.blocks->named_children()) layers.push_back(layer(name, *child, packer));
  norm = norm_of(model.norm, packer);
  fc_norm = norm_of(model.fc_norm, packer);
  if (model.pre_logits) pre_logits = packer.linear(*model.pre_logits->fc);
  if (model.head) head = packer.linear(*model.head);
  if (model.head_dist) head_dist = packer.linear(*model.head_dist);
}

}  // namespace vit::infer
