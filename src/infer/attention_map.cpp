// Attention maps and their rendering (see attention_map.h).
#include "infer/attention_map.h"

#include <algorithm>
#include <cmath>

namespace vit::infer {
namespace {

// Head-mean attention of one block for image 0: (N, N).
std::vector<double> head_mean(const Tensor& probs) {
  const int64_t NH = probs.size(1), N = probs.size(2);
  const Tensor p = probs.contiguous();
  const float* data = p.data<float>();
  std::vector<double> a(static_cast<size_t>(N * N), 0.0);
  for (int64_t h = 0; h < NH; ++h) {
    for (int64_t i = 0; i < N * N; ++i) a[i] += data[h * N * N + i] / static_cast<double>(NH);
  }
  return a;
}

// The query row used as "what the model looks at": the CLS row, or the mean of all rows.
std::vector<float> patch_weights(const std::vector<double>& a, int64_t N, bool cls) {
  const int64_t first = cls ? 1 : 0;
  std::vector<double> w(static_cast<size_t>(N - first), 0.0);
  for (int64_t i = 0; i < (cls ? 1 : N); ++i) {
    for (int64_t j = first; j < N; ++j) w[j - first] += a[i * N + j];
  }
  double total = 0.0;
  for (double v : w) total += v;
  std::vector<float> out;
  for (double v : w) out.push_back(static_cast<float>(total > 0 ? v / total : 0.0));
  return out;
}

// A perceptual colour ramp (dark blue -> cyan -> yellow -> red) for t in [0, 1].
void colour(double t, double rgb[3]) {
  static const double stops[5][3] = {
      {0.05, 0.05, 0.35}, {0.0, 0.45, 0.85}, {0.1, 0.8, 0.7}, {0.95, 0.85, 0.1}, {0.85, 0.1, 0.05}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const auto i = std::min<int64_t>(static_cast<int64_t>(t), 3);
  const double f = t - static_cast<double>(i);
  for (int c = 0; c < 3; ++c) rgb[c] = stops[i][c] * (1 - f) + stops[i + 1][c] * f;
}

}  // namespace

AttentionMaps attention_maps(model::VisionTransformer& model, const data::Image& image, const Preprocess& preprocess) {
  const model::ViTConfig& c = model.config();
  Tensor input = Tensor::empty({1, c.in_channels, c.image_size, c.image_size});
  preprocess_into(image, preprocess, c.in_channels, input.data<float>());
  // Every map needs at least one block's attention (a model is built with depth >= 1; check
  // rather than trust it).
  std::vector<nn::MultiHeadSelfAttention*> attentions;
  for (const auto& [name, block] : model.blocks->named_children()) {
    auto* encoder_block = dynamic_cast<nn::EncoderBlock*>(block.get());
    VIT_CHECK(encoder_block != nullptr, "attention", "blocks.{} is not an encoder block", name);
    attentions.push_back(encoder_block->attn.get());
  }
  VIT_CHECK(!attentions.empty(), "attention", "{} has no encoder blocks: there is no attention to draw", c.name);
  for (auto* attn : attentions) attn->keep_attention = true;
  const bool was_training = model.is_training();
  model.eval();
  // A classifier also says what it sees; a CLIP image tower or a feature extractor (DINOv2) has no
  // classes to name, and its class-token map needs no head: the tokens alone.
  const bool classifier = c.has_head() && !c.projection;
  Tensor probs;
  {
    NoGradGuard no_grad;
    if (classifier) {
      probs = softmax(model(Variable(input)), 1).data().contiguous();
    } else {
      model.forward_tokens(Variable(input));
    }
  }
  model.train(was_training);
  AttentionMaps maps;
  maps.grid = c.grid();
  if (classifier) {
    const float* p = probs.data<float>();
    maps.predicted_class = std::max_element(p, p + c.num_classes) - p;
    maps.probability = p[maps.predicted_class];
  }
  const bool cls = c.pool_kind() == model::PoolKind::Cls;
  const int64_t N = c.num_tokens();
  std::vector<double> rollout(static_cast<size_t>(N * N), 0.0);
  for (int64_t i = 0; i < N; ++i) rollout[i * N + i] = 1.0;
  for (auto* attn : attentions) {
    std::vector<double> a = head_mean(attn->last_attention);
    for (int64_t i = 0; i < N; ++i) {  // 0.5 A + 0.5 I, rows renormalised
      double row = 0.0;
      for (int64_t j = 0; j < N; ++j) row += (a[i * N + j] = 0.5 * a[i * N + j] + (i == j ? 0.5 : 0.0));
      for (int64_t j = 0; j < N; ++j) a[i * N + j] /= row;
    }
    std::vector<double> next(static_cast<size_t>(N * N), 0.0);
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t k = 0; k < N; ++k) {
        const double aik = a[i * N + k];
        for (int64_t j = 0; j < N; ++j) next[i * N + j] += aik * rollout[k * N + j];
      }
    }
    rollout.swap(next);
    attn->keep_attention = false;
  }
  maps.last_layer = patch_weights(head_mean(attentions.back()->last_attention), N, cls);
  maps.rollout = patch_weights(rollout, N, cls);
  for (auto* attn : attentions) attn->last_attention = Tensor();
  return maps;
}

data::Image render_attention(const data::Image& image, const AttentionMaps& maps, int64_t size) {
  const data::Image base = resize(data::convert_channels(image, 3), size, size);
  data::Image out{3, size, 3 * size + 16, std::vector<uint8_t>(static_cast<size_t>(3 * size * (3 * size + 16)), 255)};
  const int64_t W = out.width;
  auto put = [&](int64_t x0, int64_t y, int64_t x, const double rgb[3]) {
    for (int c = 0; c < 3; ++c) {
      out.pixels[(c * size + y) * W + x0 + x] = static_cast<uint8_t>(std::lround(std::clamp(rgb[c], 0.0, 1.0) * 255));
    }
  };
  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) {
      const double rgb[3] = {base.pixels[(0 * size + y) * size + x] / 255.0,
                             base.pixels[(1 * size + y) * size + x] / 255.0,
                             base.pixels[(2 * size + y) * size + x] / 255.0};
      put(0, y, x, rgb);
    }
  }
  const std::vector<float>* heat[2] = {&maps.last_layer, &maps.rollout};
  for (int m = 0; m < 2; ++m) {
    const std::vector<float>& w = *heat[m];
    const float top = *std::max_element(w.begin(), w.end());
    const int64_t x0 = (m + 1) * (size + 8);
    for (int64_t y = 0; y < size; ++y) {
      for (int64_t x = 0; x < size; ++x) {
        // Bilinear upsampling of the grid (cell centres), normalised to the map's maximum.
        const double gy = std::clamp((static_cast<double>(y) + 0.5) * maps.grid / size - 0.5, 0.0, maps.grid - 1.0);
        const double gx = std::clamp((static_cast<double>(x) + 0.5) * maps.grid / size - 0.5, 0.0, maps.grid - 1.0);
        const auto iy = static_cast<int64_t>(gy), ix = static_cast<int64_t>(gx);
        const int64_t iy1 = std::min(iy + 1, maps.grid - 1), ix1 = std::min(ix + 1, maps.grid - 1);
        const double fy = gy - iy, fx = gx - ix;
        const double v = (1 - fy) * ((1 - fx) * w[iy * maps.grid + ix] + fx * w[iy * maps.grid + ix1]) +
                         fy * ((1 - fx) * w[iy1 * maps.grid + ix] + fx * w[iy1 * maps.grid + ix1]);
        double rgb[3];
        colour(top > 0 ? v / top : 0.0, rgb);
        for (int c = 0; c < 3; ++c) rgb[c] = 0.55 * rgb[c] + 0.45 * base.pixels[(c * size + y) * size + x] / 255.0;
        put(x0, y, x, rgb);
      }
    }
  }
  return out;
}

}  // namespace vit::infer
