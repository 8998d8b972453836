// The graph-free inference path (see inference.h).
#include "infer/inference.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "kernels/fused.h"
#include "kernels/im2row.h"
#include "kernels/int8_gemm.h"
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

// LayerNorm of float32 rows (in place allowed): the training kernel, without saving statistics.
void layernorm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n, double eps) {
  kernels::layernorm_forward<float>(x, w, b, y, nullptr, nullptr, rows, n, eps);
}

enum Buffer : size_t { kRows, kX, kH, kQkv, kAttn, kHidden, kPooled, kStemPixels, kStemPlanes, kCount };

// The stem's layers, checked: Conv2d(3x3, stride 1, padding 1) then GELU, stem_layers times.
std::vector<std::pair<const nn::Conv2d*, const nn::GELU*>> stem_layers(const model::VisionTransformer& model) {
  std::vector<std::pair<const nn::Conv2d*, const nn::GELU*>> layers;
  if (!model.stem) return layers;
  const auto children = model.stem->named_children();
  VIT_CHECK(children.size() % 2 == 0, "inference", "the stem has {} layers, not (conv, GELU) pairs", children.size());
  for (size_t i = 0; i < children.size(); i += 2) {
    const auto* conv = dynamic_cast<const nn::Conv2d*>(children[i].second.get());
    const auto* gelu = dynamic_cast<const nn::GELU*>(children[i + 1].second.get());
    VIT_CHECK(conv && gelu && conv->kernel_size == 3 && conv->stride == 1 && conv->padding == 1 && conv->bias.defined(),
              "inference", "stem.{} is not a 3x3 convolution (stride 1, padding 1, bias) followed by GELU", i);
    layers.emplace_back(conv, gelu);
  }
  return layers;
}

}  // namespace

struct InferenceSession::Packed {
  std::unordered_map<const float*, kernels::PackedMatrix> weights;
  std::unordered_map<const nn::Linear*, kernels::Int8Matrix> int8;  // the quantized Linears
  std::vector<std::pair<const nn::Conv2d*, const nn::GELU*>> stem;  // the model's stem, checked once

  void add(const Variable& weight, int64_t out_features, int64_t in_features, bool release) {
    const float* w = ptr(weight);
    if (weights.count(w)) return;
    weights.emplace(w, kernels::PackedMatrix::from_weight(w, out_features, in_features));
    if (release && weight.data().is_file_mapped()) {
      release_pages(w, static_cast<size_t>(out_features * in_features) * sizeof(float));
    }
  }

  // y (rows, out) = epilogue(x (rows, in) @ W^T + bias); W packed unless the CPU lacks AVX2.
  void linear(const float* x, int64_t rows, const Variable& weight, const Variable& bias, int64_t out_features,
              int64_t in_features, float* y, kernels::Epilogue e) const {
    const auto it = weights.find(ptr(weight));
    if (it != weights.end()) {
      kernels::linear_forward_packed(x, rows, in_features, in_features, it->second, ptr(bias), y, out_features, e);
    } else {
      kernels::linear_forward<float>(x, rows, in_features, in_features, ptr(weight), out_features, ptr(bias), y,
                                     out_features, e);
    }
  }
  // An int8 Linear: its values and scales packed for the int8 kernel (on any CPU).
  void add_int8(const nn::Linear& l, bool release) {
    const Tensor& q = l.weight.data();
    VIT_CHECK(q.is_contiguous() && l.weight_scale.is_contiguous() && l.weight_scale.dtype() == DType::F32, "inference",
              "int8 weight {} with scale {}: not contiguous or not float32", shape_str(q.shape()),
              shape_str(l.weight_scale.shape()));
    int8.emplace(&l, kernels::Int8Matrix::from_quantized(q.data<int8_t>(), l.weight_scale.data<float>(), l.out_features,
                                                         l.in_features));
    if (release && q.is_file_mapped()) release_pages(q.data<int8_t>(), static_cast<size_t>(q.numel()));
  }

  void linear(const float* x, int64_t rows, const nn::Linear& l, float* y, kernels::Epilogue e) const {
    if (l.quantized()) {
      const auto it = int8.find(&l);
      VIT_CHECK(it != int8.end(), "inference", "an int8 Linear the session did not pack");
      kernels::linear_int8(x, rows, l.in_features, l.in_features, it->second, ptr(l.bias), y, l.out_features, e);
      return;
    }
    linear(x, rows, l.weight, l.bias, l.out_features, l.in_features, y, e);
  }
};

InferenceSession::InferenceSession(const model::VisionTransformer& model, WeightPages pages)
    : model_(model), buffers_(kCount) {
  const bool release = pages == WeightPages::Release;
  VIT_CHECK(supports(model), "inference",
            "the inference path needs float32 (or int8 Linear) parameters with contiguous storage");
  auto packed = std::make_shared<Packed>();
  packed->stem = stem_layers(model);
  const bool simd = kernels::packed_gemm_supported();  // float weights are packed only where the kernel runs
  if (simd) {
    const model::ViTConfig& c = model.config();
    packed->add(model.patch_embed->proj->weight, c.dim, c.embed_channels() * c.patch_size * c.patch_size, release);
    for (const auto& [conv, gelu] : packed->stem) {
      packed->add(conv->weight, conv->out_channels, conv->in_channels * 9, release);
    }
  }
  // Every Linear below the root, depth first: int8 ones for the int8 kernel (any CPU), float ones
  // for the packed GEMM.
  std::vector<std::shared_ptr<nn::Module>> stack;
  for (const auto& [name, child] : model.named_children()) stack.push_back(child);
  while (!stack.empty()) {
    const std::shared_ptr<nn::Module> m = stack.back();
    stack.pop_back();
    if (const auto* l = dynamic_cast<const nn::Linear*>(m.get())) {
      if (l->quantized()) {
        packed->add_int8(*l, release);
      } else if (simd) {
        packed->add(l->weight, l->out_features, l->in_features, release);
      }
    }
    for (const auto& [name, child] : m->named_children()) stack.push_back(child);
  }
  packed_ = std::move(packed);
}

InferenceSession::~InferenceSession() = default;

bool InferenceSession::supports(const model::VisionTransformer& model) {
  // int8 parameters only come as the weights of int8 Linears (load_state_dict refuses others).
  for (const auto& [name, p] : model.named_parameters()) {
    const DType d = p.data().dtype();
    if ((d != DType::F32 && d != DType::I8) || !p.data().is_contiguous()) return false;
  }
  return true;
}

float* InferenceSession::buffer(size_t index, size_t floats) {
  std::vector<float>& b = buffers_[index];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

Tensor InferenceSession::forward(const Tensor& images) {
  Tensor result;
  run(images, true, result);
  return result;
}

Tensor InferenceSession::forward_features(const Tensor& images) {
  Tensor result;
  run(images, false, result);
  return result;
}

void InferenceSession::run(const Tensor& input, bool with_head, Tensor& result) {
  const model::ViTConfig& c = model_.config();
  VIT_CHECK(input.dim() == 4 && input.size(1) == c.in_channels && input.size(2) == c.image_size &&
                input.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(input.shape()), c.in_channels, c.image_size,
            c.image_size);
  const Tensor images = input.to(DType::F32).contiguous();
  const int64_t B = images.size(0), P = c.num_patches(), D = c.dim, F = c.hidden_dim(), H = c.num_heads;
  const bool cls = model_.cls_token.defined();
  const int64_t N = P + (cls ? 1 : 0), rows = B * N;
  if (B == 0) {
    result = Tensor::empty({0, with_head ? c.num_classes : (c.representation_size > 0 ? c.representation_size : D)});
    return;
  }

  // ---- [stem: per layer im2row + GEMM with bias and GELU fused, (B, HW, S) -> planes (B, S, H, W)] ----
  const float* pixels = images.data<float>();
  int64_t channels = c.in_channels;
  const int64_t HW = c.image_size * c.image_size;
  for (const auto& [conv3, gelu] : packed_->stem) {
    const kernels::ConvShape ss{B, channels, c.image_size, c.image_size, 3, 3, 1, 1};
    const int64_t S = conv3->out_channels;
    float* rows3 = buffer(kRows, static_cast<size_t>(B * HW * ss.row_length()));
    kernels::im2row<float>(ss, pixels, rows3);
    float* last = buffer(kStemPixels, static_cast<size_t>(B * HW * S));
    packed_->linear(rows3, B * HW, conv3->weight, conv3->bias, S, ss.row_length(), last,
                    gelu->tanh_approximation ? kernels::Epilogue::GeluTanh : kernels::Epilogue::Gelu);
    float* planes = buffer(kStemPlanes, static_cast<size_t>(B * HW * S));
#pragma omp parallel for schedule(static) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        const float* __restrict src = last + b * HW * S + s;
        float* __restrict dst = planes + (b * S + s) * HW;
        for (int64_t i = 0; i < HW; ++i) dst[i] = src[i * S];
      }
    }
    pixels = planes;
    channels = S;
  }

  // ---- patch embedding: im2row + GEMM, then tokens = [cls; patches + bias] + pos_embed ----
  const nn::Conv2d& conv = *model_.patch_embed->proj;
  const kernels::ConvShape cs{B, channels, c.image_size, c.image_size, c.patch_size, c.patch_size, c.patch_size, 0};
  const int64_t K = cs.row_length();
  float* patch_rows = buffer(kRows, static_cast<size_t>(B * P * K));
  kernels::im2row<float>(cs, pixels, patch_rows);
  float* h = buffer(kH, static_cast<size_t>(rows * D));  // patch embeddings, then LayerNorm outputs
  packed_->linear(patch_rows, B * P, conv.weight, conv.bias, D, K, h, kernels::Epilogue::Store);
  float* x = buffer(kX, static_cast<size_t>(rows * D));
  const float* pos = ptr(model_.pos_embed);
  const float* cls_token = ptr(model_.cls_token);
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % N;
    float* __restrict xr = x + r * D;
    const float* __restrict pr = pos + t * D;
    if (cls && t == 0) {
      for (int64_t i = 0; i < D; ++i) xr[i] = cls_token[i] + pr[i];
    } else {
      const float* __restrict src = h + ((r / N) * P + t - (cls ? 1 : 0)) * D;
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) xr[i] = src[i] + pr[i];
    }
  }

  // ---- encoder blocks (pre-norm): x += proj(attn(norm1(x))); x += fc2(gelu(fc1(norm2(x)))) ----
  float* qkv = buffer(kQkv, static_cast<size_t>(rows * 3 * D));
  float* attn = buffer(kAttn, static_cast<size_t>(rows * D));
  float* hidden = buffer(kHidden, static_cast<size_t>(rows * F));
  const kernels::AttentionShape as{B, N, H, D / H};
  const double scale = 1.0 / std::sqrt(static_cast<double>(D / H));
  for (const auto& [name, child] : model_.blocks->named_children()) {
    const auto* block_ptr = dynamic_cast<const nn::EncoderBlock*>(child.get());
    VIT_CHECK(block_ptr != nullptr, "inference", "blocks.{} is not an encoder block", name);
    const nn::EncoderBlock& block = *block_ptr;
    const nn::MultiHeadSelfAttention& a = *block.attn;
    layernorm_rows(x, ptr(block.norm1->weight), ptr(block.norm1->bias), h, rows, D, block.norm1->eps);
    packed_->linear(h, rows, *a.qkv, qkv, kernels::Epilogue::Store);
    kernels::attention_inference(as, qkv, scale, attn);
    packed_->linear(attn, rows, *a.proj, x, kernels::Epilogue::Accumulate);  // x += proj(attn): the residual
    const nn::Mlp& mlp = *block.mlp;
    layernorm_rows(x, ptr(block.norm2->weight), ptr(block.norm2->bias), h, rows, D, block.norm2->eps);
    packed_->linear(h, rows, *mlp.fc1, hidden,
                    mlp.act->tanh_approximation ? kernels::Epilogue::GeluTanh : kernels::Epilogue::Gelu);
    packed_->linear(hidden, rows, *mlp.fc2, x, kernels::Epilogue::Accumulate);
  }

  // ---- pooling: the CLS row (final norm on B rows only) or the mean of the tokens + fc_norm ----
  float* pooled = buffer(kPooled, static_cast<size_t>(B * D));
  if (model_.norm) {
    for (int64_t b = 0; b < B; ++b) std::memcpy(pooled + b * D, x + b * N * D, static_cast<size_t>(D) * sizeof(float));
    layernorm_rows(pooled, ptr(model_.norm->weight), ptr(model_.norm->bias), pooled, B, D, model_.norm->eps);
  } else {
#pragma omp parallel for schedule(static) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> sum(static_cast<size_t>(D), 0.0);
      for (int64_t t = 0; t < N; ++t) {
        const float* xr = x + (b * N + t) * D;
        for (int64_t i = 0; i < D; ++i) sum[i] += xr[i];
      }
      for (int64_t i = 0; i < D; ++i) pooled[b * D + i] = static_cast<float>(sum[i] / static_cast<double>(N));
    }
    layernorm_rows(pooled, ptr(model_.fc_norm->weight), ptr(model_.fc_norm->bias), pooled, B, D, model_.fc_norm->eps);
  }
  const float* features = pooled;
  int64_t width = D;
  Tensor pre;
  if (model_.pre_logits) {
    const nn::Linear& fc = *model_.pre_logits->fc;
    pre = Tensor::empty({B, fc.out_features});
    packed_->linear(pooled, B, fc, pre.data<float>(), kernels::Epilogue::Store);
    kernels::bias_tanh_inplace(pre.data<float>(), nullptr, B, fc.out_features);
    features = pre.data<float>();
    width = fc.out_features;
  }
  if (!with_head) {
    result = Tensor::empty({B, width});
    std::memcpy(result.data<float>(), features, static_cast<size_t>(B * width) * sizeof(float));
    return;
  }
  const nn::Linear& head = *model_.head;
  result = Tensor::empty({B, head.out_features});
  packed_->linear(features, B, head, result.data<float>(), kernels::Epilogue::Store);
}

}  // namespace vit::infer
