// What a dataset's images are read as (see dataset.h): an image file decoded, converted and
// resized as the dataset holds it (JPEGs at a reduced DCT scale when squashed or cropped for
// training; the shaper's transform decoded whole), from a folder's file or a shard's member.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.h"
#include "core/system.h"
#include "data/dataset.h"
#include "data/resample.h"
#include "data/shards.h"

namespace vit::data {
namespace {

// A box of an image file (drawn from its full height and width) converted to `channels` and
// resized to height x width, the JPEG decoded at the smallest DCT scale that keeps the box at least
// that size (decode_image_reduced).
Image crop_reduced(const std::vector<uint8_t>& bytes, const std::string& name, int64_t channels, int64_t height,
                   int64_t width, int64_t max_pixels,
                   const std::function<std::array<int64_t, 4>(int64_t height, int64_t width)>& draw) {
  const ImageHeader full = read_image_header(bytes.data(), bytes.size(), name);
  const auto [top, left, box_h, box_w] = draw(full.height, full.width);
  const int64_t min_h = (height * full.height + box_h - 1) / box_h, min_w = (width * full.width + box_w - 1) / box_w;
  const Image photo =
      convert_channels(decode_image_reduced(bytes.data(), bytes.size(), name, max_pixels, min_h, min_w), channels);
  // Pillow's bilinear (antialiased), as torchvision's RandomResizedCrop and Resize resample.
  if (photo.height == box_h && photo.width == box_w) return resample(photo, height, width, Resample::Bilinear);
  // The box in the decoded image's pixels.
  const int64_t t = top * photo.height / full.height, l = left * photo.width / full.width;
  const int64_t h = std::clamp<int64_t>((box_h * photo.height + full.height / 2) / full.height, 1, photo.height - t);
  const int64_t w = std::clamp<int64_t>((box_w * photo.width + full.width / 2) / full.width, 1, photo.width - l);
  Image part{photo.channels, h, w, std::vector<uint8_t>(static_cast<size_t>(photo.channels * h * w))};
  for (int64_t c = 0; c < photo.channels; ++c) {
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t* from = photo.pixels.data() + (c * photo.height + t + y) * photo.width + l;
      std::copy_n(from, w, part.pixels.data() + (c * h + y) * w);
    }
  }
  return resample(part, height, width, Resample::Bilinear);
}

}  // namespace

Image shape_image_file(const std::vector<uint8_t>& bytes, const std::string& name, int64_t channels, int64_t size,
                       int64_t max_pixels, const ImageShaper& shaper) {
  if (!shaper) {
    return crop_reduced(bytes, name, channels, size, size, max_pixels, [](int64_t h, int64_t w) {
      return std::array<int64_t, 4>{0, 0, h, w};
    });
  }
  Image image = shaper(decode_image(bytes.data(), bytes.size(), name, max_pixels));
  VIT_CHECK(image.channels == channels && image.height == size && image.width == size, "image_folder",
            "{}: shaped to {}x{}x{}, not the {}x{}x{} of the dataset", name, image.channels, image.height, image.width,
            channels, size, size);
  return image;
}

Residency parse_residency(const std::string& text) {
  if (text == "auto") return Residency::Auto;
  if (text == "memory") return Residency::Memory;
  if (text == "stream") return Residency::Stream;
  fail("data", "--data-residency: must be one of auto, memory, stream, got '{}'", text);
}

bool streams(double decoded_bytes, Residency residency) {
  const bool large = decoded_bytes > std::min(kStreamAboveBytes, 0.5 * static_cast<double>(memory_limit_bytes()));
  return residency == Residency::Stream || (residency == Residency::Auto && large);
}

std::string Dataset::image_name(int64_t i) const {
  if (!members.empty()) {
    const ShardMember& m = members[static_cast<size_t>(i)];
    return fmt::format("{} (the file at byte {})", shards[m.shard], m.offset);
  }
  return files[static_cast<size_t>(i)];
}

std::vector<uint8_t> Dataset::encoded(int64_t i) const {
  VIT_CHECK(i >= 0 && i < size() && (!files.empty() || !members.empty()), "data", "{}: image {} has no file", source,
            i);
  return members.empty() ? read_file_bytes(files[static_cast<size_t>(i)]) : read_shard_member(*this, i);
}

Image Dataset::decoded(int64_t i) const {
  const std::vector<uint8_t> bytes = encoded(i);
  return decode_image(bytes.data(), bytes.size(), image_name(i), max_pixels);
}

Image Dataset::cropped(int64_t i,
                       const std::function<std::array<int64_t, 4>(int64_t height, int64_t width)>& draw) const {
  return crop_reduced(encoded(i), image_name(i), channels, height, width, max_pixels, draw);
}

void Dataset::read(int64_t i, uint8_t* out) const {
  VIT_CHECK(i >= 0 && i < size(), "data", "{}: image {} out of range (it has {})", source, i, size());
  if (!streamed()) {
    std::memcpy(out, image(i), static_cast<size_t>(image_bytes()));
    return;
  }
  const Image shaped = shape_image_file(encoded(i), image_name(i), channels, height, max_pixels, shaper);
  std::memcpy(out, shaped.pixels.data(), static_cast<size_t>(image_bytes()));
}

Image Dataset::original(int64_t i) const {
  VIT_CHECK(i >= 0 && i < size(), "data", "{}: image {} out of range (it has {})", source, i, size());
  if (streamed()) return convert_channels(decoded(i), channels);
  return Image{channels, height, width, std::vector<uint8_t>(image(i), image(i) + image_bytes())};
}

}  // namespace vit::data
