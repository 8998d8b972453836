// Resolving a VisionTransformer into the session's weight structs (see session_weights.h).
#include "infer/session_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <map>

#include "kernels/layernorm.h"
#include "kernels/linear.h"

namespace vit::infer {
namespace {

const float* ptr(const Variable& v) { return v.defined() ? v.data().data<float>() : nullptr; }

// Drops the whole pages inside [p, p + bytes) from this process (see inference.h).
void release_pages(const void* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Packs each weight once (a weight reached twice shares its packing).
class Packer {
 public:
  explicit Packer(bool release) : release_(release), simd_(kernels::packed_gemm_supported()) {}

  LinearWeights matrix(const Variable& weight, const Variable& bias, int64_t out, int64_t in) {
    LinearWeights l;
    l.in = in;
    l.out = out;
    l.bias = ptr(bias);
    l.weight = ptr(weight);
    if (!simd_) return l;  // float weights are packed only where the kernel runs
    auto& packed = float_[l.weight];
    if (!packed) {
      packed = std::make_shared<const kernels::PackedMatrix>(kernels::PackedMatrix::from_weight(l.weight, out, in));
      if (release_ && weight.data().is_file_mapped()) {
        release_pages(l.weight, static_cast<size_t>(out * in) * sizeof(float));
      }
    }
    l.packed = packed;
    return l;
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
      packed = std::make_shared<const kernels::Int8Matrix>(kernels::Int8Matrix::from_quantized(
          q.data<int8_t>(), layer.weight_scale.data<float>(), layer.out_features, layer.in_features));
      if (release_ && q.is_file_mapped()) release_pages(q.data<int8_t>(), static_cast<size_t>(q.numel()));
    }
    l.int8 = packed;
    return l;
  }

 private:
  bool release_, simd_;
  std::map<const float*, std::shared_ptr<const kernels::PackedMatrix>> float_;
  std::map<const nn::Linear*, std::shared_ptr<const kernels::Int8Matrix>> int8_;
};

NormWeights norm_of(const std::shared_ptr<nn::LayerNorm>& ln) {
  if (!ln) return {};
  return {ptr(ln->weight), ptr(ln->bias), ln->eps, true};
}

MlpActivation mlp_activation(const nn::Mlp& mlp) {
  const std::string& name = mlp.act_name;
  if (name == "gelu") return MlpActivation::Gelu;
  if (name == "gelu_tanh") return MlpActivation::GeluTanh;
  if (name == "quick_gelu") return MlpActivation::QuickGelu;
  if (name == "relu") return MlpActivation::Relu;
  fail("inference", "MLP activation '{}' (gelu, gelu_tanh, quick_gelu, relu)", name);
}

LayerWeights layer(const std::string& name, const nn::Module& module, Packer& packer) {
  const auto* block = dynamic_cast<const nn::EncoderBlock*>(&module);
  VIT_CHECK(block != nullptr, "inference", "blocks.{} is not an encoder block", name);
  LayerWeights w;
  const nn::MultiHeadSelfAttention& a = *block->attn;
  w.norm1 = norm_of(block->norm1);
  w.norm2 = norm_of(block->norm2);
  w.q_norm = norm_of(a.q_norm);
  w.k_norm = norm_of(a.k_norm);
  w.qkv = packer.linear(*a.qkv);
  w.proj = packer.linear(*a.proj);
  const nn::Mlp& mlp = *block->mlp;
  w.fc1 = packer.linear(*mlp.fc1);
  if (mlp.fc2) {
    w.fc2 = packer.linear(*mlp.fc2);
    w.activation = mlp_activation(mlp);
  }
  if (block->ls1) w.ls1 = ptr(block->ls1->gamma);
  if (block->ls2) w.ls2 = ptr(block->ls2->gamma);
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

}  // namespace

void LinearWeights::forward(const float* x, int64_t rows, float* y, const kernels::Epilogue& epilogue) const {
  if (int8) {
    kernels::linear_int8(x, rows, in, in, *int8, bias, y, out, epilogue);
  } else if (packed) {
    kernels::linear_forward_packed(x, rows, in, in, *packed, bias, y, out, epilogue);
  } else {
    kernels::linear_forward<float>(x, rows, in, in, weight, out, bias, y, out, epilogue);
  }
}

void NormWeights::forward(const float* x, float* y, int64_t rows, int64_t n) const {
  kernels::layernorm_forward<float>(x, weight, bias, y, nullptr, nullptr, rows, n, eps);
}

SessionWeights::SessionWeights(const model::VisionTransformer& model, bool release) {
  const model::ViTConfig& c = model.config();
  Packer packer(release);
  stem = stem_of(model, packer);
  const nn::Conv2d& proj = *model.patch_embed->proj;
  patch = packer.matrix(proj.weight, proj.bias, c.dim, c.embed_channels() * c.patch_size * c.patch_size);
  if (model.cls_token.defined()) prefix_rows.push_back(ptr(model.cls_token));
  dist_token = model.dist_token.defined();
  if (dist_token) prefix_rows.push_back(ptr(model.dist_token));
  for (int64_t r = 0; r < c.reg_tokens; ++r) prefix_rows.push_back(ptr(model.reg_token) + r * c.dim);
  pos = ptr(model.pos_embed);
  norm_pre = norm_of(model.norm_pre);
  for (const auto& [name, child] : model.blocks->named_children()) layers.push_back(layer(name, *child, packer));
  norm = norm_of(model.norm);
  fc_norm = norm_of(model.fc_norm);
  if (model.pre_logits) pre_logits = packer.linear(*model.pre_logits->fc);
  if (model.head) head = packer.linear(*model.head);
  if (model.head_dist) head_dist = packer.linear(*model.head_dist);
}

}  // namespace vit::infer
