// What serving an encoded image costs before the model (issue 44): decoding a 500x375 photo-like
// JPEG (q90, ~75 KB, as people send them) and preprocessing it as `vit predict` / `vit serve` do
// for a ViT at 224 (shorter side 248 bicubic, centre crop 224, normalised), apart and together.
#include <benchmark/benchmark.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "data/image.h"
#include "infer/preprocess.h"

namespace {

using namespace vit;

const std::vector<uint8_t>& photo_jpeg() {
  static const std::vector<uint8_t> bytes = [] {
    data::Image image{3, 375, 500, std::vector<uint8_t>(3 * 375 * 500)};
    uint32_t noise = 12345;
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < 375; ++y) {
        for (int64_t x = 0; x < 500; ++x) {
          noise = noise * 1664525u + 1013904223u;
          const double v = 128 + 100 * std::sin(x / 37.0 + c) * std::cos(y / 23.0 - c) + ((noise >> 24) % 9) - 4.0;
          image.pixels[static_cast<size_t>((c * 375 + y) * 500 + x)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    }
    const std::string path = (std::filesystem::temp_directory_path() / "vit_bench_photo.jpg").string();
    data::write_image(path, image);  // q90
    std::vector<uint8_t> b = data::read_file_bytes(path);
    std::filesystem::remove(path);
    return b;
  }();
  return bytes;
}

infer::Preprocess vit224() {
  infer::Preprocess p;
  p.resize = 248;
  p.crop = 224;
  p.filter = infer::Filter::Bicubic;
  return p;
}

void decode_jpeg(benchmark::State& state) {
  const std::vector<uint8_t>& jpg = photo_jpeg();
  for (auto _ : state) benchmark::DoNotOptimize(data::decode_image(jpg.data(), jpg.size(), "photo").pixels.data());
  state.counters["bytes"] = static_cast<double>(jpg.size());
}

void preprocess_224(benchmark::State& state) {
  const std::vector<uint8_t>& jpg = photo_jpeg();
  const data::Image image = data::decode_image(jpg.data(), jpg.size(), "photo");
  std::vector<float> out(3 * 224 * 224);
  for (auto _ : state) {
    infer::preprocess_into(image, vit224(), 3, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

// The path before the crop-only resample: the whole image resized, then cropped (the same pixels).
void preprocess_224_full_resize(benchmark::State& state) {
  const std::vector<uint8_t>& jpg = photo_jpeg();
  const data::Image image = data::decode_image(jpg.data(), jpg.size(), "photo");
  const infer::Preprocess p = vit224();
  for (auto _ : state) {
    const auto [h, w] = infer::resized_size(image.height, image.width, p.resize);
    const data::Image cropped = infer::center_crop(infer::resize_pil(image, h, w, p.filter), p.crop);
    benchmark::DoNotOptimize(cropped.pixels.data());
  }
}

void preprocess_224_crop_only(benchmark::State& state) {
  const std::vector<uint8_t>& jpg = photo_jpeg();
  const data::Image image = data::decode_image(jpg.data(), jpg.size(), "photo");
  for (auto _ : state) benchmark::DoNotOptimize(infer::resize_and_crop(image, vit224()).pixels.data());
}

void decode_and_preprocess_224(benchmark::State& state) {
  const std::vector<uint8_t>& jpg = photo_jpeg();
  std::vector<float> out(3 * 224 * 224);
  for (auto _ : state) {
    infer::preprocess_into(data::decode_image(jpg.data(), jpg.size(), "photo"), vit224(), 3, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

BENCHMARK(decode_jpeg)->Unit(benchmark::kMillisecond);
BENCHMARK(preprocess_224)->Unit(benchmark::kMillisecond);
BENCHMARK(preprocess_224_full_resize)->Unit(benchmark::kMillisecond);
BENCHMARK(preprocess_224_crop_only)->Unit(benchmark::kMillisecond);
BENCHMARK(decode_and_preprocess_224)->Unit(benchmark::kMillisecond);

}  // namespace
