// Batch preparation and the background loader (see loader.h).
#include "data/loader.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <system_error>

#include "data/auto_augment.h"

namespace vit::data {
namespace {

// Gamma(shape, 1) by Marsaglia-Tsang, for Beta sampling.
double sample_gamma(double shape, Generator& gen) {
  if (shape < 1.0) return sample_gamma(shape + 1.0, gen) * std::pow(gen.uniform_double() + 1e-300, 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = gen.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = gen.uniform_double();
    if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u + 1e-300) < 0.5 * x * x + d * (1.0 - v + std::log(v)))
      return d * v;
  }
}

double sample_beta(double alpha, Generator& gen) {
  const double a = sample_gamma(alpha, gen), b = sample_gamma(alpha, gen);
  return a / (a + b);
}

// Random erasing as timm's RandomErasing does it in "pixel" mode: a box of 2-33% of the image with
// a log-uniform aspect ratio in [0.3, 3.3] (up to 10 draws until one fits inside), filled with
// standard normal noise in normalised units.
void erase_box(float* out, int64_t C, int64_t H, int64_t W, Generator& gen) {
  const double area = static_cast<double>(H * W), log_lo = std::log(0.3), log_hi = std::log(1 / 0.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.02 + (1.0 / 3.0 - 0.02) * gen.uniform_double());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * gen.uniform_double());
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (h < 1 || w < 1 || h >= H || w >= W) continue;
    const auto top = static_cast<int64_t>(gen.integer(static_cast<uint64_t>(H - h + 1)));
    const auto left = static_cast<int64_t>(gen.integer(static_cast<uint64_t>(W - w + 1)));
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = top; y < top + h; ++y) {
        for (int64_t x = left; x < left + w; ++x) out[(c * H + y) * W + x] = static_cast<float>(gen.normal());
      }
    }
    return;
  }
}

// One image (C, H, W; its pixels at src) into out as normalised floats, augmented when train.
void fill_image(const Dataset& d, const uint8_t* src, const AugmentConfig& aug, const Normalization& norm, bool train,
                Generator& gen, float* out) {
  const int64_t C = d.channels, H = d.height, W = d.width;
  // Inverse affine map from output to source coordinates (about the image centre).
  double a00 = 1, a01 = 0, a10 = 0, a11 = 1, tx = 0, ty = 0;
  bool flip = false;
  int64_t crop_dx = 0, crop_dy = 0;
  if (train) {
    if (aug.rotate_degrees > 0 || aug.translate > 0 || aug.scale_min != 1.0 || aug.scale_max != 1.0) {
      const double angle = (2 * gen.uniform_double() - 1) * aug.rotate_degrees * M_PI / 180.0;
      const double scale = aug.scale_min + (aug.scale_max - aug.scale_min) * gen.uniform_double();
      tx = (2 * gen.uniform_double() - 1) * aug.translate * static_cast<double>(W);
      ty = (2 * gen.uniform_double() - 1) * aug.translate * static_cast<double>(H);
      const double cs = std::cos(angle) / scale, sn = std::sin(angle) / scale;
      a00 = cs, a01 = sn, a10 = -sn, a11 = cs;
    }
    if (aug.crop_padding > 0) {
      crop_dx = static_cast<int64_t>(gen.integer(2 * aug.crop_padding + 1)) - aug.crop_padding;
      crop_dy = static_cast<int64_t>(gen.integer(2 * aug.crop_padding + 1)) - aug.crop_padding;
    }
    flip = aug.hflip && gen.uniform_double() < 0.5;
  }
  const bool identity = a00 == 1 && a01 == 0 && a10 == 0 && a11 == 1 && tx == 0 && ty == 0;
  const double cx = (static_cast<double>(W) - 1) / 2, cy = (static_cast<double>(H) - 1) / 2;
  for (int64_t c = 0; c < C; ++c) {
    const uint8_t* plane = src + c * H * W;
    const double mean = norm.mean[c], std = norm.std[c];
    if (identity && crop_dx == 0 && crop_dy == 0) {  // each pixel value's normalised float, by table
      float table[256];
      for (int v = 0; v < 256; ++v) table[v] = static_cast<float>((static_cast<float>(v) / 255.0f - mean) / std);
      for (int64_t y = 0; y < H; ++y) {
        const uint8_t* row = plane + y * W;
        float* dst = out + (c * H + y) * W;
        if (flip) {
          for (int64_t x = 0; x < W; ++x) dst[x] = table[row[W - 1 - x]];
        } else {
          for (int64_t x = 0; x < W; ++x) dst[x] = table[row[x]];
        }
      }
      continue;
    }
    auto pixel = [&](int64_t y, int64_t x) -> double {
      return (y >= 0 && y < H && x >= 0 && x < W) ? plane[y * W + x] : 0.0;
    };
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t x = 0; x < W; ++x) {
        const int64_t ox = flip ? W - 1 - x : x;
        double v;
        if (identity) {
          v = pixel(y + crop_dy, ox + crop_dx);
        } else {  // bilinear sample at the inverse-mapped point
          const double dx = static_cast<double>(ox) - cx - tx, dy = static_cast<double>(y) - cy - ty;
          const double sx = a00 * dx + a01 * dy + cx + static_cast<double>(crop_dx);
          const double sy = a10 * dx + a11 * dy + cy + static_cast<double>(crop_dy);
          const auto x0 = static_cast<int64_t>(std::floor(sx)), y0 = static_cast<int64_t>(std::floor(sy));
          const double fx = sx - static_cast<double>(x0), fy = sy - static_cast<double>(y0);
          v = (1 - fy) * ((1 - fx) * pixel(y0, x0) + fx * pixel(y0, x0 + 1)) +
              fy * ((1 - fx) * pixel(y0 + 1, x0) + fx * pixel(y0 + 1, x0 + 1));
        }
        // vit predict's arithmetic (infer::preprocess_into): the pixel scaled in float32, then
        // normalised in double, so an image folder's photo reaches the model bit for bit as there.
        out[(c * H + y) * W + x] = static_cast<float>((static_cast<float>(v) / 255.0f - mean) / std);
      }
    }
  }
  if (train && aug.erase_prob > 0 && gen.uniform_double() < aug.erase_prob) erase_box(out, C, H, W, gen);
}

}  // namespace

namespace {
std::atomic<int> loader_threads_asked{0};  // set_loader_threads'
}  // namespace

int loader_threads() {
  const int asked = loader_threads_asked.load();
  if (asked > 0) return asked;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void check_loader_threads(int64_t threads) {
  VIT_CHECK(threads >= 0 && threads <= kMaxLoaderThreads, "data", "--loader-threads must be in [0, {}], got {}",
            kMaxLoaderThreads, threads);
}

void set_loader_threads(int64_t threads) {
  check_loader_threads(threads);
  loader_threads_asked.store(static_cast<int>(threads));
}

namespace {

// fn(j) for j in [0, n) on the loader threads (the caller is one of them); the first error is
// rethrown after all have stopped.
void on_loader_threads(int64_t n, const std::function<void(int64_t)>& fn) {
  const int threads = static_cast<int>(std::min<int64_t>(loader_threads(), n));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t j = next++; j < n; j = next++) {
      try {
        fn(j);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // the others stop after their current image
      }
    }
  };
  std::vector<std::thread> pool;
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had (a process limit): the ones started and this one do the work.
  }
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::vector<std::vector<uint8_t>> decode_images(const Dataset& d, const std::vector<int64_t>& indices) {
  std::vector<std::vector<uint8_t>> out(indices.size());
  on_loader_threads(static_cast<int64_t>(indices.size()), [&](int64_t j) {
    out[static_cast<size_t>(j)].resize(static_cast<size_t>(d.image_bytes()));
    d.read(indices[static_cast<size_t>(j)], out[static_cast<size_t>(j)].data());
  });
  return out;
}

CropBox random_resized_box(int64_t height, int64_t width, double scale_min, Generator& gen) {
  constexpr double kRatioMin = 3.0 / 4.0, kRatioMax = 4.0 / 3.0;
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(kRatioMin), log_hi = std::log(kRatioMax);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (scale_min + (1.0 - scale_min) * gen.uniform_double());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * gen.uniform_double());
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const auto top = static_cast<int64_t>(gen.integer(static_cast<uint64_t>(height - h + 1)));
      const auto left = static_cast<int64_t>(gen.integer(static_cast<uint64_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  // The fallback: the whole image, cut to the nearest allowed aspect, centred.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < kRatioMin) {
    h = std::lround(static_cast<double>(w) / kRatioMin);
  } else if (in_ratio > kRatioMax) {
    w = std::lround(static_cast<double>(h) * kRatioMax);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Normalization compute_normalization(const Dataset& data) {
  VIT_CHECK(data.size() > 0 && data.channels > 0, "data", "{}: no images to compute the normalisation from",
            data.source);
  const int64_t C = data.channels, HW = data.height * data.width;
  std::vector<double> sum(C, 0.0), sum_sq(C, 0.0);
  // A streamed dataset: kNormalizationSample images evenly spaced over it, decoded by the loader
  // threads (all of them would mean reading the whole folder before the first step).
  std::vector<int64_t> chosen(
      static_cast<size_t>(data.streamed() ? std::min(data.size(), kNormalizationSample) : data.size()));
  for (size_t j = 0; j < chosen.size(); ++j) {
    chosen[j] = static_cast<int64_t>(static_cast<double>(j) * static_cast<double>(data.size()) /
                                     static_cast<double>(chosen.size()));
  }
  std::vector<std::vector<uint8_t>> decoded;
  if (data.streamed()) decoded = decode_images(data, chosen);
  for (size_t j = 0; j < chosen.size(); ++j) {
    const uint8_t* image = data.streamed() ? decoded[j].data() : data.image(chosen[j]);  // (C, H, W)
    for (int64_t c = 0; c < C; ++c) {
      uint64_t s = 0, sq = 0;  // exact integer sums per image and channel
      for (int64_t p = 0; p < HW; ++p) {
        const uint64_t v = image[c * HW + p];
        s += v;
        sq += v * v;
      }
      sum[c] += static_cast<double>(s);
      sum_sq[c] += static_cast<double>(sq);
    }
  }
  Normalization norm;
  const double n = static_cast<double>(static_cast<int64_t>(chosen.size()) * HW);
  for (int64_t c = 0; c < C; ++c) {
    const double mean = sum[c] / n / 255.0;
    const double var = std::max(0.0, sum_sq[c] / n / (255.0 * 255.0) - mean * mean);
    norm.mean.push_back(mean);
    norm.std.push_back(var > 0 ? std::sqrt(var) : 1.0);  // a constant channel: leave its scale alone
  }
  return norm;
}

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Batch make_batch(const Dataset& d, const std::vector<int64_t>& indices, const AugmentConfig& aug,
                 const Normalization& norm, bool train, uint64_t key, BatchSlice slice) {
  VIT_CHECK(static_cast<int64_t>(norm.mean.size()) == d.channels && static_cast<int64_t>(norm.std.size()) == d.channels,
            "data", "normalisation has {} means / {} stds for {} channels", norm.mean.size(), norm.std.size(),
            d.channels);
  const auto B = static_cast<int64_t>(indices.size());
  const int64_t begin = slice.begin, end = slice.end < 0 ? B : slice.end;
  VIT_CHECK(0 <= begin && begin <= end && end <= B, "data", "rows [{}, {}) are not a slice of a batch of {}", begin,
            end, B);
  for (int64_t b = 0; b < B; ++b) {
    VIT_CHECK(indices[b] >= 0 && indices[b] < d.size(), "data", "index {} out of range for {} images", indices[b],
              d.size());
  }
  const int64_t n = end - begin, image = d.image_bytes();
  Batch batch;
  batch.first = begin;
  batch.global_size = B;
  batch.indices.assign(indices.begin() + begin, indices.begin() + end);
  batch.images = Tensor::empty({n, d.channels, d.height, d.width});
  std::vector<int64_t> labels(n);
  float* out = batch.images.data<float>();
  const bool mixup = aug.mixup_alpha > 0, cutmix = aug.cutmix_alpha > 0;
  const bool mixed = train && B > 1 && (mixup || cutmix);
  // A streamed dataset, or a random resized crop: the rows this slice needs (and, mixed, their
  // partners) made first, by the loader threads (decoded; cropped from the original photo and
  // resized, the box drawn from the row's own stream); source[b] is row b's pixels either way.
  const bool crop = train && aug.rrc_scale > 0;
  std::vector<const uint8_t*> source(static_cast<size_t>(B), nullptr);
  std::vector<std::vector<uint8_t>> made;
  if (d.streamed() || crop) {
    std::vector<int64_t> rows;
    for (int64_t b = begin; b < end; ++b) rows.push_back(b);
    if (mixed) {
      for (int64_t b = begin; b < end; ++b) {
        if (B - 1 - b < begin || B - 1 - b >= end) rows.push_back(B - 1 - b);
      }
    }
    made.resize(rows.size());
    on_loader_threads(static_cast<int64_t>(rows.size()), [&](int64_t j) {
      const int64_t b = rows[static_cast<size_t>(j)];
      std::vector<uint8_t>& pixels = made[static_cast<size_t>(j)];
      if (!crop) {
        pixels.resize(static_cast<size_t>(d.image_bytes()));
        return d.read(indices[b], pixels.data());
      }
      Generator gen(mix_seed(key, 0x5252C, static_cast<uint64_t>(b)));
      if (d.streamed()) {  // the photo's box, decoded no larger than it needs (DCT scaling)
        pixels = d.cropped(indices[b], [&](int64_t h, int64_t w) {
                    const CropBox box = random_resized_box(h, w, aug.rrc_scale, gen);
                    return std::array<int64_t, 4>{box.top, box.left, box.height, box.width};
                  }).pixels;
        return;
      }
      const Image photo = d.original(indices[b]);
      const CropBox box = random_resized_box(photo.height, photo.width, aug.rrc_scale, gen);
      Image part{photo.channels, box.height, box.width,
                 std::vector<uint8_t>(static_cast<size_t>(photo.channels * box.height * box.width))};
      for (int64_t c = 0; c < photo.channels; ++c) {
        for (int64_t y = 0; y < box.height; ++y) {
          const uint8_t* from = photo.pixels.data() + (c * photo.height + box.top + y) * photo.width + box.left;
          std::copy_n(from, box.width, part.pixels.data() + (c * box.height + y) * box.width);
        }
      }
      pixels = resize(part, d.height, d.width).pixels;
    });
    for (size_t j = 0; j < rows.size(); ++j) source[static_cast<size_t>(rows[j])] = made[j].data();
  } else {
    for (int64_t b = 0; b < B; ++b) source[static_cast<size_t>(b)] = d.image(indices[b]);
  }
  // Row b of the global batch, augmented from its own streams (the automatic policy's apart, so
  // the other draws are the same with it or without).
  const AutoAugment policy = train ? parse_auto_augment(aug.auto_augment) : AutoAugment{};
  auto fill_row = [&](int64_t b, float* dst) {
    Generator gen(mix_seed(key, 0x1A6E, static_cast<uint64_t>(b)));
    if (policy.kind == AutoAugment::Kind::None)
      return fill_image(d, source[static_cast<size_t>(b)], aug, norm, train, gen, dst);
    std::vector<uint8_t> pixels(source[static_cast<size_t>(b)], source[static_cast<size_t>(b)] + image);
    Generator draws(mix_seed(key, 0xA07A, static_cast<uint64_t>(b)));
    apply_auto_augment(policy, pixels.data(), d.channels, d.height, d.width, draws);
    fill_image(d, pixels.data(), aug, norm, train, gen, dst);
  };
  if (d.streamed() || crop || policy.kind != AutoAugment::Kind::None) {  // rows augmented by the loader threads too
    on_loader_threads(end - begin, [&](int64_t j) { fill_row(begin + j, out + j * image); });
  } else {
    for (int64_t b = begin; b < end; ++b) fill_row(b, out + (b - begin) * image);
  }
  for (int64_t b = begin; b < end; ++b) labels[b - begin] = d.labels[indices[b]];
  batch.targets = Tensor::from_data(labels, {n});
  if (mixed) {
    // Row b is mixed with row B-1-b of the global batch (timm's flipped batch); partners outside
    // the slice are computed here from their own streams.
    std::vector<int64_t> partner(n);
    std::vector<float> partners(static_cast<size_t>(n * image));
    for (int64_t b = begin; b < end; ++b) {
      const int64_t p = B - 1 - b;
      partner[b - begin] = d.labels[indices[p]];
      float* dst = partners.data() + (b - begin) * image;
      if (p >= begin && p < end)
        std::copy_n(out + (p - begin) * image, image, dst);
      else
        fill_row(p, dst);
    }
    const Tensor original = batch.images.clone();
    const float* o = original.data<float>();
    const float* q = partners.data();
    const int64_t H = d.height, W = d.width, plane = H * W;
    Generator gen(mix_seed(key, 0xBA7C4));  // the batch's draws: the same for every slice
    const bool use_cutmix = cutmix && (!mixup || gen.uniform_double() < 0.5);
    double lam = sample_beta(use_cutmix ? aug.cutmix_alpha : aug.mixup_alpha, gen);
    if (use_cutmix) {
      const double ratio = std::sqrt(1.0 - lam);
      const auto ch = static_cast<int64_t>(static_cast<double>(H) * ratio),
                 cw = static_cast<int64_t>(static_cast<double>(W) * ratio);
      const auto cy = static_cast<int64_t>(gen.integer(H)), cx = static_cast<int64_t>(gen.integer(W));
      const int64_t y0 = std::max<int64_t>(cy - ch / 2, 0), y1 = std::min<int64_t>(cy + ch / 2, H);
      const int64_t x0 = std::max<int64_t>(cx - cw / 2, 0), x1 = std::min<int64_t>(cx + cw / 2, W);
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t c = 0; c < d.channels; ++c) {
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = x0; x < x1; ++x) {
              out[(b * d.channels + c) * plane + y * W + x] = q[(b * d.channels + c) * plane + y * W + x];
            }
          }
        }
      }
      lam = 1.0 - static_cast<double>((y1 - y0) * (x1 - x0)) / static_cast<double>(plane);  // the area actually pasted
    } else {
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < image; ++i) {
          out[b * image + i] = static_cast<float>(lam * o[b * image + i] + (1.0 - lam) * q[b * image + i]);
        }
      }
    }
    batch.targets_b = Tensor::from_data(partner, {n});
    batch.lam = lam;
  }
  return batch;
}

std::vector<std::vector<int64_t>> epoch_batches(int64_t size, int64_t batch_size, bool shuffle, bool drop_last,
                                                uint64_t seed, int64_t epoch) {
  VIT_CHECK(batch_size > 0, "data", "batch size must be positive, got {}", batch_size);
  std::vector<int64_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  if (shuffle) {
    Generator gen(mix_seed(seed, 0x5348554646ULL, static_cast<uint64_t>(epoch)));
    for (int64_t i = size - 1; i > 0; --i) std::swap(order[i], order[gen.integer(i + 1)]);
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start < size; start += batch_size) {
    const int64_t end = std::min(size, start + batch_size);
    if (drop_last && end - start < batch_size && !batches.empty()) break;
    batches.emplace_back(order.begin() + start, order.begin() + end);
  }
  return batches;
}

BatchSlice batch_rows(const std::vector<std::vector<int64_t>>& bounds, size_t i, int64_t size, int64_t part,
                      int64_t parts) {
  if (bounds.empty()) return BatchSlice::share(size, part, parts);
  const std::vector<int64_t>& b = bounds.at(i);
  VIT_CHECK(static_cast<int64_t>(b.size()) == parts + 1 && part >= 0 && part < parts, "data",
            "the epoch was planned for {} ranks, not {}", static_cast<int64_t>(b.size()) - 1, parts);
  return {b[static_cast<size_t>(part)], b[static_cast<size_t>(part) + 1]};
}

BatchLoader::BatchLoader(const Dataset& data, std::vector<std::vector<int64_t>> batches, LoaderOptions options)
    : data_(data), batches_(std::move(batches)), options_(std::move(options)) {
  options_.prefetch = std::max<size_t>(options_.prefetch, 1);
  options_.first = std::min(options_.first, batches_.size());
  consumed_ = options_.first;
  VIT_CHECK(options_.parts >= 1 && options_.part >= 0 && options_.part < options_.parts, "data",
            "part {} of {} is not a share of a batch", options_.part, options_.parts);
  VIT_CHECK(options_.bounds.empty() || options_.bounds.size() == batches_.size(), "data",
            "{} batches but row bounds for {}", batches_.size(), options_.bounds.size());
  for (const auto& b : options_.bounds) {
    VIT_CHECK(static_cast<int64_t>(b.size()) == options_.parts + 1, "data", "row bounds for {} ranks, not {}",
              static_cast<int64_t>(b.size()) - 1, options_.parts);
  }
  worker_ = std::thread([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  worker_.join();
}

void BatchLoader::work() {
  try {
    for (size_t i = options_.first; i < batches_.size(); ++i) {
      const BatchSlice slice =
          batch_rows(options_.bounds, i, static_cast<int64_t>(batches_[i].size()), options_.part, options_.parts);
      Batch batch = make_batch(data_, batches_[i], options_.augment, options_.norm, options_.train,
                               mix_seed(options_.seed, static_cast<uint64_t>(options_.epoch) + 1, i + 1), slice);
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [this] { return stop_ || queue_.size() < options_.prefetch; });
      if (stop_) return;
      queue_.push_back(std::move(batch));
      ++produced_;
      ready_.notify_one();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    ready_.notify_one();
  }
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (consumed_ == batches_.size()) return std::nullopt;
  ready_.wait(lock, [this] { return !queue_.empty() || error_; });
  if (queue_.empty() && error_) std::rethrow_exception(error_);
  Batch batch = std::move(queue_.front());
  queue_.pop_front();
  ++consumed_;
  space_.notify_one();
  return batch;
}

}  // namespace vit::data
