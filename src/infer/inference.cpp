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
#include "kernels/vmath.h"

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

enum Buffer : size_t { kRows, kX, kH, kQkv, kAttn, kHidden, kPooled, kStemPixels, kStemPlanes, kBranch, kCount };

// QuickGELU (OpenAI CLIP) in place: x * sigmoid(1.702 x), NaN kept.
void quick_gelu_inplace(float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float x = y[i];
    float a = -1.702f * std::fabs(x);
    a = a == a ? a : 0.0f;                 // NaN: any finite exponent (x * s stays NaN)
    const float t = kernels::exp_fast(a);  // exp(-1.702 |x|) in (0, 1]
    y[i] = x * (x >= 0.0f ? 1.0f / (1.0f + t) : t / (1.0f + t));
  }
}

void relu_inplace(float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : (y[i] == y[i] ? 0.0f : y[i]);
}

// x (rows, D) += branch (rows, D) * gamma (D): a LayerScale'd residual.
void add_scaled(float* x, const float* branch, const float* gamma, int64_t rows, int64_t D) {
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) x[r * D + i] += branch[r * D + i] * gamma[i];
  }
}

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
  VIT_CHECK(model_.head != nullptr, "vit",
            "{} has no classification head (num_classes 0: a feature extractor); use its features (vit embed)",
            model_.config().name);
  Tensor result;
  run(images, Output::Logits, model_.config().pool, result);
  return result;
}

Tensor InferenceSession::forward_features(const Tensor& images) {
  Tensor result;
  run(images, Output::Features, model_.config().pool, result);
  return result;
}

Tensor InferenceSession::embed(const Tensor& images, Pool kind) {
  const std::string pool = pool_name(kind);
  VIT_CHECK(pool != "cls" || model_.config().class_token(), "embed",
            "{} has no class token: pool it with avg (or take the tokens)", model_.config().name);
  Tensor result;
  run(images, pool == "tokens" ? Output::Tokens : Output::Embedding, pool, result);
  return result;
}

void InferenceSession::run(const Tensor& input, Output output, const std::string& pool, Tensor& result) {
  const model::ViTConfig& c = model_.config();
  VIT_CHECK(input.dim() == 4 && input.size(1) == c.in_channels && input.size(2) == c.image_size &&
                input.size(3) == c.image_size,
            "vit", "input {}: expected (B, {}, {}, {})", shape_str(input.shape()), c.in_channels, c.image_size,
            c.image_size);
  const Tensor images = input.to(DType::F32).contiguous();
  const int64_t B = images.size(0), P = c.num_patches(), D = c.dim, F = c.hidden_dim(), H = c.num_heads,
                A = c.attn_dim(), HD = c.head_dim();
  const int64_t prefix = c.prefix_tokens(), N = c.num_tokens(), rows = B * N;
  const int64_t features_width = c.representation_size > 0 ? c.representation_size : D;
  if (B == 0) {
    switch (output) {
      case Output::Logits:
        result = Tensor::empty({0, c.num_classes});
        break;
      case Output::Features:
        result = Tensor::empty({0, features_width});
        break;
      case Output::Tokens:
        result = Tensor::empty({0, N, D});
        break;
      case Output::Embedding:
        result = Tensor::empty({0, c.projection ? c.num_classes : features_width});
        break;
    }
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

  // ---- patch embedding: im2row + GEMM, then tokens = [prefix; patches + bias] + pos_embed ----
  const nn::Conv2d& conv = *model_.patch_embed->proj;
  const kernels::ConvShape cs{B, channels, c.image_size, c.image_size, c.patch_size, c.patch_size, c.patch_size, 0};
  const int64_t K = cs.row_length();
  float* patch_rows = buffer(kRows, static_cast<size_t>(B * P * K));
  kernels::im2row<float>(cs, pixels, patch_rows);
  float* h = buffer(kH, static_cast<size_t>(rows * D));  // patch embeddings, then LayerNorm outputs
  packed_->linear(patch_rows, B * P, conv.weight, conv.bias, D, K, h, kernels::Epilogue::Store);
  float* x = buffer(kX, static_cast<size_t>(rows * D));
  const float* pos = ptr(model_.pos_embed);
  // The prefix rows: [cls] [dist] [reg x R], each a parameter row.
  std::vector<const float*> prefix_rows;
  if (model_.cls_token.defined()) prefix_rows.push_back(ptr(model_.cls_token));
  if (model_.dist_token.defined()) prefix_rows.push_back(ptr(model_.dist_token));
  for (int64_t r = 0; r < c.reg_tokens; ++r) prefix_rows.push_back(ptr(model_.reg_token) + r * D);
  const bool embed_prefix = !c.no_embed_class;  // does the position table cover the prefix rows?
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % N;
    float* __restrict xr = x + r * D;
    if (t < prefix) {
      const float* __restrict src = prefix_rows[static_cast<size_t>(t)];
      if (embed_prefix) {
        const float* __restrict pr = pos + t * D;
        for (int64_t i = 0; i < D; ++i) xr[i] = src[i] + pr[i];
      } else {
        for (int64_t i = 0; i < D; ++i) xr[i] = src[i];
      }
    } else {
      const float* __restrict src = h + ((r / N) * P + t - prefix) * D;
      const float* __restrict pr = pos + (embed_prefix ? t : t - prefix) * D;
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) xr[i] = src[i] + pr[i];
    }
  }
  if (model_.norm_pre) {
    layernorm_rows(x, ptr(model_.norm_pre->weight), ptr(model_.norm_pre->bias), x, rows, D, model_.norm_pre->eps);
  }

  // ---- encoder blocks (pre-norm): x += [ls1] proj(attn(norm1(x))); x += [ls2] mlp(norm2(x)) ----
  float* qkv = buffer(kQkv, static_cast<size_t>(rows * 3 * A));
  float* attn = buffer(kAttn, static_cast<size_t>(rows * A));
  float* hidden = buffer(kHidden, static_cast<size_t>(rows * F));
  const kernels::AttentionShape as{B, N, H, HD};
  const double scale = 1.0 / std::sqrt(static_cast<double>(HD));
  // A block's LayerNorm: over each token's D channels, or (norm_tokens) over an image's N x D values.
  auto block_norm = [&](const nn::LayerNorm& ln, float* out) {
    const int64_t n = c.norm_tokens ? N * D : D;
    layernorm_rows(x, ptr(ln.weight), ptr(ln.bias), out, rows * D / n, n, ln.eps);
  };
  // x += branch: accumulated by the GEMM itself, or through a LayerScale gamma.
  auto residual = [&](const float* in, int64_t in_rows, const nn::Linear& l, const nn::LayerScale* ls) {
    if (ls == nullptr) {
      packed_->linear(in, in_rows, l, x, kernels::Epilogue::Accumulate);
      return;
    }
    float* branch = buffer(kBranch, static_cast<size_t>(rows * D));
    packed_->linear(in, in_rows, l, branch, kernels::Epilogue::Store);
    add_scaled(x, branch, ptr(ls->gamma), rows, D);
  };
  for (const auto& [name, child] : model_.blocks->named_children()) {
    const auto* block_ptr = dynamic_cast<const nn::EncoderBlock*>(child.get());
    VIT_CHECK(block_ptr != nullptr, "inference", "blocks.{} is not an encoder block", name);
    const nn::EncoderBlock& block = *block_ptr;
    const nn::MultiHeadSelfAttention& a = *block.attn;
    block_norm(*block.norm1, h);
    packed_->linear(h, rows, *a.qkv, qkv, kernels::Epilogue::Store);
    if (a.q_norm) {  // each head's q and k normalised over its HD channels, in place
      const float *qw = ptr(a.q_norm->weight), *qb = ptr(a.q_norm->bias), *kw = ptr(a.k_norm->weight),
                  *kb = ptr(a.k_norm->bias);
#pragma omp parallel for schedule(static) if (rows > 64)
      for (int64_t r = 0; r < rows; ++r) {
        float* q = qkv + r * 3 * A;
        kernels::layernorm_forward<float>(q, qw, qb, q, nullptr, nullptr, H, HD, a.q_norm->eps);
        kernels::layernorm_forward<float>(q + A, kw, kb, q + A, nullptr, nullptr, H, HD, a.k_norm->eps);
      }
    }
    kernels::attention_inference(as, qkv, scale, attn);
    residual(attn, rows, *a.proj, block.ls1.get());  // x += [ls1] proj(attn)
    const nn::Mlp& mlp = *block.mlp;
    block_norm(*block.norm2, h);
    if (!mlp.fc2) {  // one Linear(D, D) (the ViT notebook)
      residual(h, rows, *mlp.fc1, block.ls2.get());
      continue;
    }
    const std::string& act = mlp.act_name;
    packed_->linear(h, rows, *mlp.fc1, hidden,
                    act == "gelu"        ? kernels::Epilogue::Gelu
                    : act == "gelu_tanh" ? kernels::Epilogue::GeluTanh
                                         : kernels::Epilogue::Store);
    if (act == "quick_gelu") quick_gelu_inplace(hidden, rows * F);
    if (act == "relu") relu_inplace(hidden, rows * F);
    residual(hidden, rows, *mlp.fc2, block.ls2.get());
  }

  // ---- the token sequence after the final norm ----
  if (output == Output::Tokens) {
    result = Tensor::empty({B, N, D});
    float* out = result.data<float>();
    if (model_.norm) {
      layernorm_rows(x, ptr(model_.norm->weight), ptr(model_.norm->bias), out, rows, D, model_.norm->eps);
    } else {
      std::memcpy(out, x, static_cast<size_t>(rows * D) * sizeof(float));
    }
    return;
  }

  // ---- pooling: the class row (distilled: and the distillation row) after the final norm (on
  // those rows only), or the mean of the patch tokens then fc_norm ----
  const bool distilled = model_.head_dist != nullptr && output == Output::Logits;
  const int64_t taken = pool == "cls" && model_.dist_token.defined() ? 2 : 1;  // rows per image read
  float* pooled = buffer(kPooled, static_cast<size_t>(B * D * 2));
  if (pool == "cls") {
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(pooled + b * taken * D, x + b * N * D, static_cast<size_t>(taken * D) * sizeof(float));
    }
    if (model_.norm) {
      layernorm_rows(pooled, ptr(model_.norm->weight), ptr(model_.norm->bias), pooled, B * taken, D, model_.norm->eps);
    }
  } else {
#pragma omp parallel for schedule(static) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> sum(static_cast<size_t>(D), 0.0);
      for (int64_t t = prefix; t < N; ++t) {
        const float* xr = x + (b * N + t) * D;
        for (int64_t i = 0; i < D; ++i) sum[i] += xr[i];
      }
      for (int64_t i = 0; i < D; ++i) pooled[b * D + i] = static_cast<float>(sum[i] / static_cast<double>(N - prefix));
    }
    // A cls-pooled model asked for the patch mean: its tokens pass its final norm first (the mean
    // of normalised rows, as pool_tokens on forward_tokens' output).
    if (model_.norm) {
#pragma omp parallel for schedule(static) if (B > 1)
      for (int64_t b = 0; b < B; ++b) {
        std::vector<float> row(static_cast<size_t>(D));
        std::vector<double> sum(static_cast<size_t>(D), 0.0);
        for (int64_t t = prefix; t < N; ++t) {
          layernorm_rows(x + (b * N + t) * D, ptr(model_.norm->weight), ptr(model_.norm->bias), row.data(), 1, D,
                         model_.norm->eps);
          for (int64_t i = 0; i < D; ++i) sum[i] += row[i];
        }
        for (int64_t i = 0; i < D; ++i) {
          pooled[b * D + i] = static_cast<float>(sum[i] / static_cast<double>(N - prefix));
        }
      }
    }
    if (model_.fc_norm) {
      layernorm_rows(pooled, ptr(model_.fc_norm->weight), ptr(model_.fc_norm->bias), pooled, B, D, model_.fc_norm->eps);
    }
  }
  if (distilled) {  // logits = (head(x_cls) + head_dist(x_dist)) / 2
    const nn::Linear& head = *model_.head;
    result = Tensor::empty({B, head.out_features});
    Tensor second = Tensor::empty({B, head.out_features});
    // The class rows sit at even rows of pooled (stride 2D): run each head on its rows.
    std::vector<float> cls_rows(static_cast<size_t>(B * D)), dist_rows(static_cast<size_t>(B * D));
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(cls_rows.data() + b * D, pooled + 2 * b * D, static_cast<size_t>(D) * sizeof(float));
      std::memcpy(dist_rows.data() + b * D, pooled + (2 * b + 1) * D, static_cast<size_t>(D) * sizeof(float));
    }
    packed_->linear(cls_rows.data(), B, head, result.data<float>(), kernels::Epilogue::Store);
    packed_->linear(dist_rows.data(), B, *model_.head_dist, second.data<float>(), kernels::Epilogue::Store);
    float* r = result.data<float>();
    const float* d = second.data<float>();
    for (int64_t i = 0; i < B * head.out_features; ++i) r[i] = 0.5f * (r[i] + d[i]);
    return;
  }
  if (taken == 2) {  // features of a distilled model: the mean of its class and distillation rows
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < D; ++i) pooled[b * D + i] = 0.5f * (pooled[2 * b * D + i] + pooled[(2 * b + 1) * D + i]);
    }
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
  if (output == Output::Features || (output == Output::Embedding && !c.projection)) {
    result = Tensor::empty({B, width});
    std::memcpy(result.data<float>(), features, static_cast<size_t>(B * width) * sizeof(float));
    return;
  }
  const nn::Linear& head = *model_.head;
  result = Tensor::empty({B, head.out_features});
  packed_->linear(features, B, head, result.data<float>(), kernels::Epilogue::Store);
  if (c.head_tanh) kernels::bias_tanh_inplace(result.data<float>(), nullptr, B, head.out_features);
}

}  // namespace vit::infer
