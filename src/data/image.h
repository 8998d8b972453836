// Images as 8-bit (C, H, W) planes: decode PNG/JPEG/BMP with stb_image (refusing images
// over a pixel limit before decoding them), convert channels, resize (stb_image_resize, with
// antialiasing when shrinking), and encode PNG (stb_image_write).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/output_file.h"

namespace vit::data {

struct Image {
  int64_t channels = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // (C, H, W), channel-planar
};

inline constexpr int64_t kDefaultMaxPixels = 64ll * 1024 * 1024;  // decompression-bomb guard

// Throws "[image] FILE: ..." if the file is missing, not an image, or larger than max_pixels.
Image read_image(const std::string& path, int64_t max_pixels = kDefaultMaxPixels);
Image decode_image(const uint8_t* bytes, size_t size, const std::string& name, int64_t max_pixels = kDefaultMaxPixels);
// A JPEG decoded at libjpeg-turbo's smallest DCT scaling (7/8, 3/4, ... 1/8 of each side) that
// still gives at least min_height x min_width pixels: the inverse DCT and colour conversion of
// the pixels not wanted are never done (at 1/2, a quarter of them). PNG and BMP decode whole. For
// training, which shrinks the image anyway; evaluation decodes whole, as PIL does.
Image decode_image_reduced(const uint8_t* bytes, size_t size, const std::string& name, int64_t max_pixels,
                           int64_t min_height, int64_t min_width);
// An image file's bytes ("[image] PATH: ..." if it cannot be read).
std::vector<uint8_t> read_file_bytes(const std::string& path);
// What an image's header says, without decoding it (a server sizes the decode first): the
// channels decode_image gives, height, width. Throws as decode_image does for a file it cannot read.
struct ImageHeader {
  int64_t channels = 0, height = 0, width = 0;
};
ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& name);
// Grey <-> RGB (luminance 0.299 R + 0.587 G + 0.114 B, as PIL's convert("L")); drops alpha.
Image convert_channels(const Image& image, int64_t channels);
Image resize(const Image& image, int64_t height, int64_t width);
// PNG bytes of an image (1 or 3 channels), e.g. for embedding in a report.
std::vector<uint8_t> encode_png(const Image& image);
// The writers write whole files or nothing (core/output_file.h: a temporary file beside `path`,
// fsynced, renamed); Existing::Refuse leaves a file already there alone ("[image] PATH: exists").
void write_png(const std::string& path, const Image& image, Existing existing = Existing::Replace);
// PNG, JPEG (quality 95) or BMP, chosen by the file's extension; any other extension is refused.
void write_image(const std::string& path, const Image& image, Existing existing = Existing::Replace);

}  // namespace vit::data
