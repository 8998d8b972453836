// The inference session's stages (see vit_stages.h).
#include "infer/vit_stages.h"

#include <cmath>
#include <cstring>

#include "kernels/conv/direct_conv.h"
#include "kernels/fused.h"
#include "kernels/im2row.h"
#include "kernels/layernorm.h"

namespace vit::infer {

VitDims::VitDims(const model::ViTConfig& c, int64_t batch)
    : B(batch),
      N(c.num_tokens()),
      D(c.dim),
      F(c.hidden_dim()),
      H(c.num_heads),
      A(c.attn_dim()),
      HD(c.head_dim()),
      prefix(c.prefix_tokens()),
      rows(batch * c.num_tokens()),
      norm_tokens(c.norm_tokens) {}

float* Activations::sized(std::vector<float>& buffer, int64_t floats) {
  if (buffer.size() < static_cast<size_t>(floats)) buffer.resize(static_cast<size_t>(floats));
  return buffer.data();
}

namespace {

// A block's LayerNorm of x into out: over each token's D channels, or (norm_tokens) over an
// image's N x D values.
void block_norm(const NormWeights& ln, const VitDims& d, const float* x, float* out) {
  const int64_t n = d.norm_tokens ? d.N * d.D : d.D;
  ln.forward(x, out, d.rows * d.D / n, n);
}

// x += branch: accumulated by the GEMM itself, or through a LayerScale gamma.
void residual(const LinearWeights& l, const float* in, const float* gamma, const VitDims& d, Activations& act) {
  float* x = act.x.data();
  if (gamma == nullptr) {
    l.forward(in, d.rows, x, kernels::Epilogue::Accumulate);  // (B N, D) +=
    return;
  }
  float* branch = Activations::sized(act.branch, d.rows * d.D);
  l.forward(in, d.rows, branch, kernels::Epilogue::Store);  // (B N, D)
  kernels::add_scaled_rows(x, branch, gamma, d.rows, d.D);
}

// One backbone convolution (folded BatchNorm) on x, direct where its weights are float32: planes (B, C, H, W) for the
// stem, else a channels-last map (B, H, W, C); out (B, OH, OW, O) channels-last. Returns the output's side.
int64_t backbone_conv(const ConvWeights& w, int64_t B, int64_t size, bool planes, const float* x, float* out,
                      const kernels::Epilogue& epilogue, Activations& act) {
  const kernels::ConvShape s{B, w.in_channels, size, size, w.kernel, w.kernel, w.stride, w.kernel / 2};
  if (w.direct) {
    if (planes && s.channels > 1) {  // (B, C, H, W) -> (B, H, W, C)
      const int64_t hw = size * size, C = s.channels;
      float* map = Activations::sized(act.rows, B * hw * C);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < hw; ++i) map[(b * hw + i) * C + c] = x[(b * C + c) * hw + i];
      x = map;
    }
    kernels::ConvEpilogue e;  // the GEMM epilogues backbone convolutions use: store, ReLU, += then ReLU
    e.bias = w.gemm.bias;
    e.accumulate = epilogue.beta != 0.0f;
    e.relu = epilogue.act == kernels::Activation::Relu;
    kernels::conv_nhwc_forward(s, w.out_channels, x, w.direct, out, e);
    return s.out_h();
  }
  const int64_t positions = B * s.out_h() * s.out_w();
  float* rows = Activations::sized(act.rows, positions * s.row_length());
  if (planes) {
    kernels::im2row<float>(s, x, rows);
  } else {
    kernels::im2row_nhwc<float>(s, x, rows);
  }
  w.gemm.forward(rows, positions, out, epilogue);
  return s.out_h();
}

// The backbone of a hybrid: images (B, C, H, W) -> its last map (B, h, w, C') channels-last, in
// act.map_in; returns the map's side.
int64_t run_backbone(const BackboneWeights& w, int64_t B, int64_t size, const float* images, Activations& act) {
  auto map = [&](std::vector<float>& buffer, const ConvWeights& conv, int64_t side) {
    return Activations::sized(buffer, B * side * side * conv.out_channels);
  };
  size = backbone_conv(w.stem, B, size, true, images, map(act.map_in, w.stem, size), kernels::Epilogue::Relu, act);
  // relu(conv2(relu(conv1(x))) + shortcut): the shortcut is stored (or copied) first, conv2's GEMM
  // adds onto it and applies the ReLU in its store.
  constexpr kernels::Epilogue kAddRelu{1.0f, 1.0f, kernels::Activation::Relu};
  for (const ConvBlockWeights& block : w.blocks) {
    const int64_t out_size = (size - 1) / block.conv1.stride + 1;
    float* mid = map(act.map_mid, block.conv1, out_size);
    float* out = map(act.map_out, block.conv2, out_size);
    backbone_conv(block.conv1, B, size, false, act.map_in.data(), mid, kernels::Epilogue::Relu, act);
    if (block.downsample) {
      backbone_conv(block.downsample, B, size, false, act.map_in.data(), out, kernels::Epilogue::Store, act);
    } else {
      std::memcpy(out, act.map_in.data(),
                  sizeof(float) * static_cast<size_t>(B * size * size * block.conv1.in_channels));
    }
    backbone_conv(block.conv2, B, out_size, false, mid, out, kAddRelu, act);
    std::swap(act.map_in, act.map_out);
    size = out_size;
  }
  return size;
}

}  // namespace

void embed_image_patches(const SessionWeights& w, const model::ViTConfig& c, const VitDims& d, const float* images,
                         Activations& act) {
  const int64_t B = d.B, D = d.D, P = c.num_patches(), HW = c.image_size * c.image_size;
  // The stem: per layer im2row + GEMM with bias and GELU fused, (B, HW, S) -> planes (B, S, H, W).
  const float* pixels = images;
  int64_t channels = c.in_channels;
  for (const StemLayerWeights& layer : w.stem) {
    const kernels::ConvShape ss{B, channels, c.image_size, c.image_size, 3, 3, 1, 1};
    const int64_t S = layer.out_channels;
    float* rows = Activations::sized(act.rows, B * HW * ss.row_length());  // (B HW, 9 C)
    kernels::im2row<float>(ss, pixels, rows);
    float* last = Activations::sized(act.stem_pixels, B * HW * S);  // (B, HW, S)
    layer.conv.forward(rows, B * HW, last, layer.epilogue);
    float* planes = Activations::sized(act.stem_planes, B * HW * S);  // (B, S, H, W)
    kernels::rows_to_planes(last, B, HW, S, planes);
    pixels = planes;
    channels = S;
  }
  // The patch projection: im2row + GEMM, (B P, C P P) -> (B P, D); a hybrid's reads its backbone's
  // channels-last map (1x1 patches: the map's rows themselves).
  int64_t side = c.image_size;
  if (w.backbone) {
    side = run_backbone(w.backbone, B, side, pixels, act);
    channels = c.embed_channels();
  }
  const int64_t patch = c.embed_patch();
  const kernels::ConvShape cs{B, channels, side, side, patch, patch, patch, 0};
  const float* patch_rows = act.map_in.data();
  if (!w.backbone || patch > 1) {
    float* rows = Activations::sized(act.rows, B * P * cs.row_length());  // (B P, C P P)
    if (w.backbone) {
      kernels::im2row_nhwc<float>(cs, act.map_in.data(), rows);
    } else {
      kernels::im2row<float>(cs, pixels, rows);
    }
    patch_rows = rows;
  }
  float* patches = Activations::sized(act.h, d.rows * D);  // (B, P, D)
  w.patch.forward(patch_rows, B * P, patches, kernels::Epilogue::Store);
  // tokens = [prefix; patches + bias] + pos_embed (the table covers the prefix unless no_embed_class).
  float* x = Activations::sized(act.x, d.rows * D);  // (B, N, D)
  kernels::embed_tokens(w.prefix_rows.data(), d.prefix, patches, w.pos, !c.no_embed_class, B, d.N, D, x);
  if (w.norm_pre) w.norm_pre.forward(x, x, d.rows, D);
}

void vit_transformer_layer(const LayerWeights& w, const VitDims& d, Activations& act) {
  const int64_t rows = d.rows, A = d.A;
  float* h = Activations::sized(act.h, rows * d.D);        // (B N, D)
  float* qkv = Activations::sized(act.qkv, rows * 3 * A);  // (B N, 3A)
  float* attn = Activations::sized(act.attn, rows * A);    // (B N, A)
  block_norm(w.norm1, d, act.x.data(), h);
  w.qkv.forward(h, rows, qkv, kernels::Epilogue::Store);
  if (w.q_norm) {  // each head's q and k normalised over its HD channels, in place
#pragma omp parallel for schedule(static) if (rows > 64)
    for (int64_t r = 0; r < rows; ++r) {
      float* q = qkv + r * 3 * A;
      w.q_norm.forward(q, q, d.H, d.HD);          // (NH, HD)
      w.k_norm.forward(q + A, q + A, d.H, d.HD);  // (NH, HD)
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.HD));
  kernels::attention_inference({d.B, d.N, d.H, d.HD}, qkv, scale, attn);
  residual(w.proj, attn, w.ls1, d, act);  // x += [ls1] proj(attn)
  ffw_vit(w, d, act);
}

void ffw_vit(const LayerWeights& w, const VitDims& d, Activations& act) {
  float* h = act.h.data();
  block_norm(w.norm2, d, act.x.data(), h);  // (B N, D)
  if (!w.fc2) {                             // one Linear(D, D) (the ViT notebook)
    residual(w.fc1, h, w.ls2, d, act);
    return;
  }
  float* hidden = Activations::sized(act.hidden, d.rows * d.F);  // (B N, F)
  switch (w.activation) {
    case MlpActivation::Gelu:
      w.fc1.forward(h, d.rows, hidden, kernels::Epilogue::Gelu);
      break;
    case MlpActivation::GeluTanh:
      w.fc1.forward(h, d.rows, hidden, kernels::Epilogue::GeluTanh);
      break;
    case MlpActivation::QuickGelu:
      w.fc1.forward(h, d.rows, hidden, kernels::Epilogue::Store);
      kernels::quick_gelu_inplace(hidden, d.rows * d.F);
      break;
    case MlpActivation::Relu:
      w.fc1.forward(h, d.rows, hidden, kernels::Epilogue::Store);
      kernels::relu_inplace(hidden, d.rows * d.F);
      break;
  }
  residual(w.fc2, hidden, w.ls2, d, act);  // x += [ls2] fc2(hidden)
}

void final_tokens(const SessionWeights& w, const VitDims& d, const Activations& act, float* out) {
  if (w.norm) {
    w.norm.forward(act.x.data(), out, d.rows, d.D);  // (B, N, D)
  } else {
    std::memcpy(out, act.x.data(), static_cast<size_t>(d.rows * d.D) * sizeof(float));
  }
}

Features pool_features(const SessionWeights& w, const VitDims& d, Pool pool, bool keep_distilled, Activations& act) {
  const int64_t B = d.B, D = d.D, N = d.N, prefix = d.prefix;
  const float* x = act.x.data();
  // Rows per image read: the class row, and a distilled model's distillation row.
  const int64_t taken = pool == Pool::Cls && w.dist_token ? 2 : 1;
  float* pooled = Activations::sized(act.pooled, B * D * 2);  // (B, taken, D)
  if (pool == Pool::Cls) {  // the class row(s) after the final norm (on those rows only)
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(pooled + b * taken * D, x + b * N * D, static_cast<size_t>(taken * D) * sizeof(float));
    }
    if (w.norm) w.norm.forward(pooled, pooled, B * taken, D);
    // An fc_norm model (avg-pooled) asked for its class token: through fc_norm, as timm's
    // forward_head(pre_logits=True) pools then normalises (pool_tokens does the same).
    if (w.fc_norm) w.fc_norm.forward(pooled, pooled, B * taken, D);
  } else {  // the mean of the patch tokens (each through the final norm, if any), then fc_norm
#pragma omp parallel for schedule(static) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> row(static_cast<size_t>(D));
      std::vector<double> sum(static_cast<size_t>(D), 0.0);
      for (int64_t t = prefix; t < N; ++t) {
        const float* xr = x + (b * N + t) * D;
        if (w.norm) {  // a cls-pooled model asked for the mean: as pool_tokens on forward_tokens' output
          w.norm.forward(xr, row.data(), 1, D);
          xr = row.data();
        }
        for (int64_t i = 0; i < D; ++i) sum[i] += xr[i];
      }
      for (int64_t i = 0; i < D; ++i) pooled[b * D + i] = static_cast<float>(sum[i] / static_cast<double>(N - prefix));
    }
    if (w.fc_norm) w.fc_norm.forward(pooled, pooled, B, D);
  }
  if (keep_distilled) return {pooled, D};
  if (taken == 2) {  // features of a distilled model: the mean of its class and distillation rows
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < D; ++i) pooled[b * D + i] = 0.5f * (pooled[2 * b * D + i] + pooled[(2 * b + 1) * D + i]);
    }
  }
  if (!w.pre_logits) return {pooled, D};
  float* features = Activations::sized(act.features, B * w.pre_logits.out);  // (B, representation_size)
  w.pre_logits.forward(pooled, B, features, kernels::Epilogue::Store);
  kernels::bias_tanh_inplace(features, nullptr, B, w.pre_logits.out);
  return {features, w.pre_logits.out};
}

void classifier_head(const SessionWeights& w, const VitDims& d, const Features& f, bool distilled, bool head_tanh,
                     float* logits) {
  const int64_t B = d.B, K = w.head.out;
  if (!distilled) {
    w.head.forward(f.data, B, logits, kernels::Epilogue::Store);  // (B, K)
    if (head_tanh) kernels::bias_tanh_inplace(logits, nullptr, B, K);
    return;
  }
  // logits = (head(x_cls) + head_dist(x_dist)) / 2; the class rows sit at even rows of the
  // pooled (B, 2, D): each head runs on its own rows.
  const int64_t D = f.width;
  std::vector<float> cls_rows(static_cast<size_t>(B * D)), dist_rows(static_cast<size_t>(B * D));
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(cls_rows.data() + b * D, f.data + 2 * b * D, static_cast<size_t>(D) * sizeof(float));
    std::memcpy(dist_rows.data() + b * D, f.data + (2 * b + 1) * D, static_cast<size_t>(D) * sizeof(float));
  }
  std::vector<float> second(static_cast<size_t>(B * K));
  w.head.forward(cls_rows.data(), B, logits, kernels::Epilogue::Store);               // (B, K)
  w.head_dist.forward(dist_rows.data(), B, second.data(), kernels::Epilogue::Store);  // (B, K)
  for (int64_t i = 0; i < B * K; ++i) logits[i] = 0.5f * (logits[i] + second[i]);
}

}  // namespace vit::infer
