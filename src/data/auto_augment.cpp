// TrivialAugmentWide and RandAugment (see auto_augment.h). The operations follow torchvision's
// uint8 tensor arithmetic: enhancements blend in float and truncate, the grey image is
// 0.2989 R + 0.587 G + 0.114 B truncated, the sharpness blur is the 3x3 kernel (1 1 1; 1 5 1; 1 1 1)/13
// rounded with the border kept, equalize builds its table from the histogram's cumulative sum.
#include "data/auto_augment.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "data/loader.h"

namespace vit::data {
namespace {

// In float32, as torchvision computes on a uint8 image converted to float.
uint8_t truncated(float v) { return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f)); }

// ratio * a + (1 - ratio) * b, clamped and truncated to 8 bits (torchvision's _blend).
void blend(uint8_t* a, const std::vector<float>& b, size_t n, double ratio) {
  const auto r = static_cast<float>(ratio), q = 1.0f - r;
  for (size_t i = 0; i < n; ++i) a[i] = truncated(r * static_cast<float>(a[i]) + q * b[i]);
}

std::vector<float> grey(const uint8_t* p, int64_t channels, int64_t plane) {
  std::vector<float> g(static_cast<size_t>(plane));
  for (int64_t i = 0; i < plane; ++i) {
    g[static_cast<size_t>(i)] =
        channels == 3
            ? static_cast<float>(truncated(0.2989f * p[i] + 0.587f * p[plane + i] + 0.114f * p[2 * plane + i]))
            : static_cast<float>(p[i]);
  }
  return g;
}

// Output pixel (x, y) reads source (sx, sy) = map(x, y), nearest neighbour, 0 outside.
template <typename Map>
void warp(uint8_t* pixels, int64_t channels, int64_t height, int64_t width, Map map) {
  const int64_t plane = height * width;
  std::vector<uint8_t> src(pixels, pixels + channels * plane);
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      const auto [fx, fy] = map(static_cast<double>(x), static_cast<double>(y));
      const auto sx = static_cast<int64_t>(std::floor(fx + 0.5)), sy = static_cast<int64_t>(std::floor(fy + 0.5));
      const bool inside = sx >= 0 && sx < width && sy >= 0 && sy < height;
      for (int64_t c = 0; c < channels; ++c) {
        pixels[c * plane + y * width + x] = inside ? src[static_cast<size_t>(c * plane + sy * width + sx)] : 0;
      }
    }
  }
}

void equalize_channel(uint8_t* p, int64_t n) {
  std::array<int64_t, 256> hist{};
  for (int64_t i = 0; i < n; ++i) ++hist[p[i]];
  int64_t last = 0, total = 0;
  for (int v = 0; v < 256; ++v) {
    if (hist[static_cast<size_t>(v)] != 0) last = hist[static_cast<size_t>(v)];
    total += hist[static_cast<size_t>(v)];
  }
  const int64_t step = (total - last) / 255;
  if (step == 0) return;
  std::array<uint8_t, 256> lut{};
  int64_t cumulative = 0;
  for (int v = 0; v < 256; ++v) {  // lut[v] = (cumsum up to v - 1 + step / 2) / step
    lut[static_cast<size_t>(v)] = static_cast<uint8_t>(std::min<int64_t>((cumulative + step / 2) / step, 255));
    cumulative += hist[static_cast<size_t>(v)];
  }
  for (int64_t i = 0; i < n; ++i) p[i] = lut[p[i]];
}

struct Space {
  AugmentOp op;
  double low, high;  // magnitudes: linspace(low, high, 31) (posterize: bits, see below)
  bool is_signed;
};

// The magnitude of bin `bin` (0-30) of `s` for an image of height x width; `wide` is TrivialAugmentWide's.
double magnitude_of(const Space& s, int64_t bin, bool wide, int64_t height, int64_t width) {
  const double t = static_cast<double>(bin) / static_cast<double>(kMagnitudeBins - 1);
  if (s.op == AugmentOp::Posterize) {  // 8 - round(bin / (30 / 6)) wide, 8 - round(bin / (30 / 4))
    return 8.0 - std::round(static_cast<double>(bin) / (30.0 / (wide ? 6.0 : 4.0)));
  }
  double high = s.high;
  if (!wide && s.op == AugmentOp::TranslateX) high = 150.0 / 331.0 * static_cast<double>(width);
  if (!wide && s.op == AugmentOp::TranslateY) high = 150.0 / 331.0 * static_cast<double>(height);
  return s.low + (high - s.low) * t;
}

const std::array<Space, 14>& space(bool wide) {
  static const std::array<Space, 14> trivial = {{{AugmentOp::Identity, 0, 0, false},
                                                 {AugmentOp::ShearX, 0, 0.99, true},
                                                 {AugmentOp::ShearY, 0, 0.99, true},
                                                 {AugmentOp::TranslateX, 0, 32, true},
                                                 {AugmentOp::TranslateY, 0, 32, true},
                                                 {AugmentOp::Rotate, 0, 135, true},
                                                 {AugmentOp::Brightness, 0, 0.99, true},
                                                 {AugmentOp::Color, 0, 0.99, true},
                                                 {AugmentOp::Contrast, 0, 0.99, true},
                                                 {AugmentOp::Sharpness, 0, 0.99, true},
                                                 {AugmentOp::Posterize, 0, 0, false},
                                                 {AugmentOp::Solarize, 255, 0, false},
                                                 {AugmentOp::AutoContrast, 0, 0, false},
                                                 {AugmentOp::Equalize, 0, 0, false}}};
  static const std::array<Space, 14> rand = {{{AugmentOp::Identity, 0, 0, false},
                                              {AugmentOp::ShearX, 0, 0.3, true},
                                              {AugmentOp::ShearY, 0, 0.3, true},
                                              {AugmentOp::TranslateX, 0, 0, true},
                                              {AugmentOp::TranslateY, 0, 0, true},
                                              {AugmentOp::Rotate, 0, 30, true},
                                              {AugmentOp::Brightness, 0, 0.9, true},
                                              {AugmentOp::Color, 0, 0.9, true},
                                              {AugmentOp::Contrast, 0, 0.9, true},
                                              {AugmentOp::Sharpness, 0, 0.9, true},
                                              {AugmentOp::Posterize, 0, 0, false},
                                              {AugmentOp::Solarize, 255, 0, false},
                                              {AugmentOp::AutoContrast, 0, 0, false},
                                              {AugmentOp::Equalize, 0, 0, false}}};
  return wide ? trivial : rand;
}

}  // namespace

AutoAugment parse_auto_augment(const std::string& text, const std::string& what) {
  AutoAugment a;
  if (text.empty() || text == "none") return a;
  if (text == "ta_wide") {
    a.kind = AutoAugment::Kind::TrivialWide;
    return a;
  }
  auto bad = [&] {
    fail("data",
         "{} '{}': give ta_wide (TrivialAugmentWide) or rand, rand-mM, rand-mM-nN (RandAugment: N of 1-10 "
         "operations at magnitude bin M of 0-30; default rand-m9-n2; timm's mstd and inc options are not supported)",
         what, text);
  };
  if (text.rfind("rand", 0) != 0) bad();
  a.kind = AutoAugment::Kind::Rand;
  size_t at = 4;
  while (at < text.size()) {
    if (text[at] != '-' || at + 1 >= text.size()) bad();
    const char key = text[at + 1];
    size_t end = at + 2;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == at + 2 || end - (at + 2) > 4) bad();
    const int64_t value = std::stoll(text.substr(at + 2, end - at - 2));
    if (key == 'm' && value < kMagnitudeBins) {
      a.magnitude = value;
    } else if (key == 'n' && value >= 1 && value <= 10) {
      a.ops = value;
    } else {
      bad();
    }
    at = end;
  }
  return a;
}

void apply_augment_op(AugmentOp op, double m, uint8_t* p, int64_t C, int64_t H, int64_t W) {
  const int64_t plane = H * W;
  const auto n = static_cast<size_t>(C * plane);
  switch (op) {
    case AugmentOp::Identity:
    case AugmentOp::Count:
      return;
    case AugmentOp::ShearX:
      return warp(p, C, H, W, [m](double x, double y) { return std::pair{x - m * y, y}; });
    case AugmentOp::ShearY:
      return warp(p, C, H, W, [m](double x, double y) { return std::pair{x, y - m * x}; });
    case AugmentOp::TranslateX: {
      const double t = std::trunc(m);
      return warp(p, C, H, W, [t](double x, double y) { return std::pair{x - t, y}; });
    }
    case AugmentOp::TranslateY: {
      const double t = std::trunc(m);
      return warp(p, C, H, W, [t](double x, double y) { return std::pair{x, y - t}; });
    }
    case AugmentOp::Rotate: {  // counter-clockwise by m degrees about the centre
      const double a = m * M_PI / 180.0, cs = std::cos(a), sn = std::sin(a);
      const double cx = static_cast<double>(W - 1) / 2, cy = static_cast<double>(H - 1) / 2;
      return warp(p, C, H, W, [=](double x, double y) {
        const double dx = x - cx, dy = y - cy;
        return std::pair{cx + cs * dx - sn * dy, cy + sn * dx + cs * dy};
      });
    }
    case AugmentOp::Brightness:
      return blend(p, std::vector<float>(n, 0.0f), n, 1.0 + m);
    case AugmentOp::Color: {
      if (C != 3) return;  // a grey image has no saturation
      const std::vector<float> g = grey(p, C, plane);
      std::vector<float> b(n);
      for (int64_t c = 0; c < C; ++c) std::copy(g.begin(), g.end(), b.begin() + c * plane);
      return blend(p, b, n, 1.0 + m);
    }
    case AugmentOp::Contrast: {
      const std::vector<float> g = grey(p, C, plane);
      double sum = 0;
      for (const float v : g) sum += v;
      const auto mean = static_cast<float>(sum / static_cast<double>(plane));
      return blend(p, std::vector<float>(n, mean), n, 1.0 + m);
    }
    case AugmentOp::Sharpness: {
      std::vector<float> b(p, p + n);  // the border stays
      for (int64_t c = 0; c < C; ++c) {
        const uint8_t* q = p + c * plane;
        for (int64_t y = 1; y + 1 < H; ++y) {
          for (int64_t x = 1; x + 1 < W; ++x) {
            float s = 4.0f * q[y * W + x];  // 5 at the centre: 1 of the ring's 9 plus 4
            for (int64_t dy = -1; dy <= 1; ++dy)
              for (int64_t dx = -1; dx <= 1; ++dx) s += q[(y + dy) * W + x + dx];
            b[static_cast<size_t>(c * plane + y * W + x)] = std::nearbyint(s / 13.0f);
          }
        }
      }
      return blend(p, b, n, 1.0 + m);
    }
    case AugmentOp::Posterize: {
      const auto bits = static_cast<int>(std::clamp(m, 0.0, 8.0));
      const auto mask = static_cast<uint8_t>(bits == 0 ? 0 : 0xFF << (8 - bits));
      for (size_t i = 0; i < n; ++i) p[i] &= mask;
      return;
    }
    case AugmentOp::Solarize:
      for (size_t i = 0; i < n; ++i) {
        if (p[i] >= m) p[i] = static_cast<uint8_t>(255 - p[i]);
      }
      return;
    case AugmentOp::AutoContrast:
      for (int64_t c = 0; c < C; ++c) {
        uint8_t* q = p + c * plane;
        const auto [lo, hi] = std::minmax_element(q, q + plane);
        if (*lo == *hi) continue;
        const auto low = static_cast<float>(*lo), scale = 255.0f / (static_cast<float>(*hi) - low);
        for (int64_t i = 0; i < plane; ++i) q[i] = truncated((static_cast<float>(q[i]) - low) * scale);
      }
      return;
    case AugmentOp::Equalize:
      for (int64_t c = 0; c < C; ++c) equalize_channel(p + c * plane, plane);
      return;
  }
}

void apply_auto_augment(const AutoAugment& policy, uint8_t* pixels, int64_t channels, int64_t height, int64_t width,
                        Generator& gen) {
  if (policy.kind == AutoAugment::Kind::None) return;
  const bool wide = policy.kind == AutoAugment::Kind::TrivialWide;
  const auto& ops = space(wide);
  const int64_t count = wide ? 1 : policy.ops;
  for (int64_t k = 0; k < count; ++k) {
    const Space& s = ops[static_cast<size_t>(gen.integer(ops.size()))];
    const int64_t bin = wide ? static_cast<int64_t>(gen.integer(kMagnitudeBins)) : policy.magnitude;
    double m = magnitude_of(s, bin, wide, height, width);
    if (s.is_signed && gen.integer(2) == 1) m = -m;
    apply_augment_op(s.op, m, pixels, channels, height, width);
  }
}

std::string AugmentConfig::describe() const {
  std::vector<std::string> parts;
  if (rrc_scale > 0) parts.push_back(fmt::format("random resized crop {}-1", rrc_scale));
  if (crop_padding > 0) parts.push_back(fmt::format("random crop with {} px padding", crop_padding));
  if (rotate_degrees > 0) parts.push_back(fmt::format("rotate up to {} degrees", rotate_degrees));
  if (translate > 0) parts.push_back(fmt::format("shift up to {}", translate));
  if (scale_min != 1.0 || scale_max != 1.0) parts.push_back(fmt::format("zoom {}-{}", scale_min, scale_max));
  if (hflip) parts.push_back("horizontal flip");
  if (!auto_augment.empty()) parts.push_back(auto_augment);
  if (erase_prob > 0) parts.push_back(fmt::format("random erasing {}", erase_prob));
  if (mixup_alpha > 0) parts.push_back(fmt::format("mixup {}", mixup_alpha));
  if (cutmix_alpha > 0) parts.push_back(fmt::format("cutmix {}", cutmix_alpha));
  if (parts.empty()) return "none";
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

}  // namespace vit::data
