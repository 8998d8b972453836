// Image decode / convert / resize / encode through Debian's stb (see image.h).
#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string_view>

#include "core/check.h"
#include "core/output_file.h"

namespace vit::data {
namespace {

// A cheap walk over a JPEG's marker segments before it is decoded: Huffman tables declaring
// more than 256 codes (which overflowed stb_image 2.27's tables when stb decoded JPEGs; found
// by fuzzing) and more than 256 scans (each a pass over the whole image: a denial of service
// in a tiny file) are refused with a clear message. JPEGs are decoded by libjpeg-turbo (below);
// this check keeps its own regression tests and bounds the work per file.
constexpr int kMaxJpegScans = 256;

// True for what stb takes for a JPEG: 0xFF, any number of 0xFF fill bytes, then SOI (0xD8).
// `start` is set to the byte after SOI.
bool looks_like_jpeg(const uint8_t* p, size_t size, size_t& start) {
  if (size < 2 || p[0] != 0xFF) return false;
  size_t i = 1;
  while (i < size && p[i] == 0xFF) ++i;
  start = i + 1;
  return i < size && p[i] == 0xD8;
}

void check_jpeg_segments(const uint8_t* p, size_t size, size_t start, const std::string& name) {
  auto bad = [&name](const std::string& what) { fail("image", "{}: corrupt JPEG ({})", name, what); };
  size_t i = start;
  int scans = 0;
  while (i + 4 <= size) {
    if (p[i] != 0xFF) {  // stb skips junk between segments to the next 0xFF: so does this walk
      ++i;
      continue;
    }
    const uint8_t marker = p[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xD9) return;                                  // EOI
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      i += 2;
      continue;
    }
    const size_t length = (size_t{p[i + 2]} << 8) | p[i + 3];
    if (length < 2) return;  // stb reports it
    // A segment may run past the end of the file: stb still reads it (as zeros), so check it.
    if (marker == 0xC4) {  // DHT: tables of (class/id, 16 counts, symbols), read the way stb
      // reads them: while segment bytes remain, a whole 17-byte header, even past the segment
      // (bytes past the end of the file read as 0).
      const size_t seg = i + 4, seg_len = length - 2;
      for (size_t j = 0; j < seg_len;) {
        size_t codes = 0;
        for (size_t k = 1; k <= 16; ++k) codes += seg + j + k < size ? p[seg + j + k] : 0;
        if (codes > 256) bad(fmt::format("a Huffman table declares {} codes, at most 256 exist", codes));
        j += 17 + codes;
      }
    }
    i += 2 + length;
    if (i >= size) return;
    if (marker == 0xDA) {  // SOS: skip the entropy-coded data to the next marker
      if (++scans > kMaxJpegScans) bad(fmt::format("more than {} scans", kMaxJpegScans));
      while (i + 1 < size && !(p[i] == 0xFF && p[i + 1] != 0x00 && !(p[i + 1] >= 0xD0 && p[i + 1] <= 0xD7))) ++i;
    }
  }
}

// Only PNG, JPEG and BMP reach stb: its other decoders (GIF, PSD, PIC, PNM, HDR, TGA) are
// not needed for photos and datasets, and the fuzzer found stb 2.27 undefined behaviour in
// them (PNM header integers overflow). stb tries its formats in a fixed order and none of the
// others can claim a file that starts with one of these signatures.
const char* image_format(const uint8_t* p, size_t size, size_t& jpeg_start) {
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 8 && std::memcmp(p, png, 8) == 0) return "png";
  if (looks_like_jpeg(p, size, jpeg_start)) return "jpeg";
  if (size >= 2 && p[0] == 'B' && p[1] == 'M') return "bmp";
  return nullptr;
}

// JPEG through libjpeg-turbo (the decoder PIL uses, fuzzed upstream by OSS-Fuzz), not stb: the
// fuzzer found stb 2.27's JPEG decoder reading out of bounds on corrupt Huffman data. Grey
// JPEGs decode to 1 channel, everything else to RGB; accurate IDCT and fancy upsampling, as
// libjpeg's defaults (and so PIL) do. Any error or warning (e.g. truncated data) refuses.
// A file cut short (a partial download or copy) lacks the end-of-image marker (FF D9): say so,
// rather than only what the decoder met where the data stopped.
bool has_end_marker(const uint8_t* p, size_t size) {
  for (size_t i = 0; i + 1 < size; ++i) {
    if (p[i] == 0xFF && p[i + 1] == 0xD9) return true;
  }
  return false;
}

// An Adobe APP14 segment ("Adobe" in an 0xFFEE marker, before the scan): Adobe's CMYK JPEGs store
// the inks inverted.
bool has_adobe_marker(const uint8_t* bytes, size_t size) {
  for (size_t i = 2; i + 10 < size;) {
    if (bytes[i] != 0xFF) return false;
    const uint8_t marker = bytes[i + 1];
    if (marker == 0xDA) return false;  // start of scan: no more headers
    const size_t length = (static_cast<size_t>(bytes[i + 2]) << 8) | bytes[i + 3];
    if (marker == 0xEE && length >= 7 && std::memcmp(bytes + i + 4, "Adobe", 5) == 0) return true;
    i += 2 + length;
  }
  return false;
}

// min_height/min_width > 0: decoded at libjpeg-turbo's smallest DCT scaling (at most 1) that still
// gives that many pixels (decode_image_reduced).
template <typename CheckSize>
Image decode_jpeg(const uint8_t* bytes, size_t size, const std::string& name, CheckSize check_size,
                  int64_t min_height = 0, int64_t min_width = 0) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  VIT_CHECK(handle != nullptr, "image", "{}: cannot start the JPEG decoder", name);
  const bool truncated = !has_end_marker(bytes, size);
  auto error = [&] {
    const std::string reason = tjGetErrorStr2(handle.get());
    return truncated ? fmt::format("truncated JPEG: the data ends before its end-of-image marker; {}", reason) : reason;
  };
  int w = 0, h = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes, static_cast<unsigned long>(size), &w, &h, &subsampling, &colorspace) !=
      0) {
    fail("image", "{}: cannot decode ({})", name, error());
  }
  // The header reader accepts a stream of tables only (no frame header) and reports 0 x 0.
  VIT_CHECK(w > 0 && h > 0, "image", "{}: cannot decode ({} JPEG: no image header (SOF) {})", name,
            truncated ? "truncated" : "corrupt", truncated ? "before the data ends" : "before its end-of-image marker");
  check_size(w, h);
  if (min_height > 0 || min_width > 0) {
    int factors = 0;
    const tjscalingfactor* f = tjGetScalingFactors(&factors);
    const int full_w = w, full_h = h;
    for (int i = 0; f && i < factors; ++i) {
      if (f[i].num > f[i].denom) continue;  // never enlarge
      const int sw = TJSCALED(full_w, f[i]), sh = TJSCALED(full_h, f[i]);
      if (sw >= min_width && sh >= min_height && static_cast<int64_t>(sw) * sh < static_cast<int64_t>(w) * h) {
        w = sw;
        h = sh;
      }
    }
  }
  const bool grey = colorspace == TJCS_GRAY;
  // CMYK (and YCCK) JPEGs, as print workflows write them, decode as CMYK and are converted to RGB
  // as Pillow does (R = (255 - C)(255 - K) / 255); Adobe's files store the inks inverted.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int c = grey ? 1 : 3;
  const int decoded_channels = cmyk ? 4 : c;
  std::vector<uint8_t> interleaved(static_cast<size_t>(decoded_channels) * w * h);
  if (tjDecompress2(handle.get(), bytes, static_cast<unsigned long>(size), interleaved.data(), w, 0, h,
                    grey   ? TJPF_GRAY
                    : cmyk ? TJPF_CMYK
                           : TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0) {
    fail("image", "{}: cannot decode ({})", name, error());
  }
  if (cmyk) {
    const bool inverted = has_adobe_marker(bytes, size);
    std::vector<uint8_t> rgb(static_cast<size_t>(3) * w * h);
    for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
      const uint8_t* p = &interleaved[4 * i];
      const int k = inverted ? p[3] : 255 - p[3];
      for (int ch = 0; ch < 3; ++ch) {
        const int ink = inverted ? p[ch] : 255 - p[ch];  // 255 - C: the light the ink lets through
        rgb[3 * i + ch] = static_cast<uint8_t>((ink * k + 127) / 255);
      }
    }
    interleaved.swap(rgb);
  }
  Image image;
  image.channels = c;
  image.height = h;
  image.width = w;
  image.pixels.resize(interleaved.size());
  const int64_t plane = static_cast<int64_t>(w) * h;
  for (int64_t ch = 0; ch < c; ++ch) {  // interleaved -> planar, plane by plane
    uint8_t* dst = image.pixels.data() + ch * plane;
    const uint8_t* src = interleaved.data() + ch;
    for (int64_t i = 0; i < plane; ++i) dst[i] = src[i * c];
  }
  return image;
}

// stb sizes its IDAT buffer from the lengths the chunks claim, before reading them (a 100-byte file
// claiming a 1 GiB chunk makes it allocate 1-2 GiB): every chunk's data must lie inside the file.
void check_png_chunks(const uint8_t* p, size_t size, const std::string& name) {
  size_t at = 8;  // after the signature
  while (size - at >= 8) {
    const uint32_t length =
        (uint32_t{p[at]} << 24) | (uint32_t{p[at + 1]} << 16) | (uint32_t{p[at + 2]} << 8) | p[at + 3];
    VIT_CHECK(length <= size - at - 8, "image",
              "{}: cannot decode (a PNG chunk at byte {} says {} bytes, past the end of the {}-byte file)", name, at,
              length, size);
    if (std::memcmp(p + at + 4, "IEND", 4) == 0) return;
    at += 8 + static_cast<size_t>(length);
    if (size - at < 4) return;  // its CRC cut off: stb's to judge
    at += 4;
  }
}

}  // namespace

Image decode_image(const uint8_t* bytes, size_t size, const std::string& name, int64_t max_pixels) {
  return decode_image_reduced(bytes, size, name, max_pixels, 0, 0);
}

Image decode_image_reduced(const uint8_t* bytes, size_t size, const std::string& name, int64_t max_pixels,
                           int64_t min_height, int64_t min_width) {
  VIT_CHECK(size > 0, "image", "{}: the file is empty (0 bytes)", name);
  VIT_CHECK(size <= static_cast<size_t>(INT32_MAX), "image", "{}: too large ({} bytes; at most 2 GiB)", name, size);
  size_t jpeg_start = 0;
  const char* format = image_format(bytes, size, jpeg_start);
  VIT_CHECK(format != nullptr, "image", "{}: cannot decode (not a PNG, JPEG or BMP file)", name);
  auto check_size = [&](int w, int h) {
    VIT_CHECK(w > 0 && h > 0, "image", "{}: cannot decode (its header says {}x{} pixels)", name, w, h);
    VIT_CHECK(static_cast<int64_t>(w) * h <= max_pixels, "image",
              "{}: {}x{} = {} pixels exceeds the limit of {} pixels", name, w, h, static_cast<int64_t>(w) * h,
              max_pixels);
  };
  if (std::string_view(format) == "jpeg") {
    check_jpeg_segments(bytes, size, jpeg_start, name);
    return decode_jpeg(bytes, size, name, check_size, std::max<int64_t>(min_height, 0),
                       std::max<int64_t>(min_width, 0));
  }
  if (std::string_view(format) == "png") check_png_chunks(bytes, size, name);
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(bytes, static_cast<int>(size), &w, &h, &c)) {
    fail("image", "{}: cannot decode ({})", name, stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
  }
  check_size(w, h);
  std::unique_ptr<uint8_t, void (*)(void*)> data(stbi_load_from_memory(bytes, static_cast<int>(size), &w, &h, &c, 0),
                                                 stbi_image_free);
  if (!data) {
    const char* reason = stbi_failure_reason();
    fail("image", "{}: cannot decode ({})", name, reason && *reason ? reason : "corrupt or unsupported data");
  }
  Image image;
  image.channels = c;
  image.height = h;
  image.width = w;
  image.pixels.resize(static_cast<size_t>(c) * h * w);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) image.pixels[(ch * h + y) * w + x] = data.get()[(y * w + x) * c + ch];
    }
  }
  return image;
}

ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& name) {
  VIT_CHECK(size > 0 && size <= static_cast<size_t>(INT32_MAX), "image", "{}: empty or too large ({} bytes)", name,
            size);
  size_t jpeg_start = 0;
  const char* format = image_format(bytes, size, jpeg_start);
  VIT_CHECK(format != nullptr, "image", "{}: cannot decode (not a PNG, JPEG or BMP file)", name);
  int w = 0, h = 0, c = 0;
  if (std::string_view(format) == "jpeg") {
    std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
    int subsampling = 0, colorspace = 0;
    VIT_CHECK(handle != nullptr &&
                  tjDecompressHeader3(handle.get(), bytes, static_cast<unsigned long>(size), &w, &h, &subsampling,
                                      &colorspace) == 0 &&
                  w > 0 && h > 0,
              "image", "{}: cannot decode (no readable JPEG header)", name);
    return {colorspace == TJCS_GRAY ? 1 : 3, h, w};
  }
  VIT_CHECK(stbi_info_from_memory(bytes, static_cast<int>(size), &w, &h, &c) && w > 0 && h > 0, "image",
            "{}: cannot decode ({})", name, stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
  return {c, h, w};
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  VIT_CHECK(std::filesystem::is_regular_file(path, ec), "image", "{}: cannot open (no such file, or not a file)", path);
  const auto bytes_on_disk = std::filesystem::file_size(path, ec);
  VIT_CHECK(!ec && bytes_on_disk <= static_cast<uintmax_t>(INT32_MAX), "image",
            "{}: {} bytes is too large for an image file", path, bytes_on_disk);
  std::ifstream in(path, std::ios::binary);
  VIT_CHECK(in.good(), "image", "{}: cannot open", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(bytes_on_disk));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  VIT_CHECK(!in.bad() && in.gcount() == static_cast<std::streamsize>(bytes.size()), "image",
            "{}: cannot read its {} bytes (changed while read?)", path, bytes.size());
  return bytes;
}

Image read_image(const std::string& path, int64_t max_pixels) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return decode_image(bytes.data(), bytes.size(), path, max_pixels);
}

Image convert_channels(const Image& image, int64_t channels) {
  VIT_CHECK(channels == 1 || channels == 3, "image", "can convert to 1 or 3 channels, not {}", channels);
  const int64_t plane = image.height * image.width;
  const int64_t colour = image.channels >= 3 ? 3 : 1;  // ignore alpha
  if (image.channels == channels) return image;
  if (channels == 3 && colour == 3) {  // alpha dropped: the first three planes
    return Image{3, image.height, image.width,
                 std::vector<uint8_t>(image.pixels.begin(), image.pixels.begin() + 3 * plane)};
  }
  Image out{channels, image.height, image.width, std::vector<uint8_t>(static_cast<size_t>(channels * plane))};
  for (int64_t i = 0; i < plane; ++i) {
    if (channels == 1) {
      const double v =
          colour == 1 ? image.pixels[i]
                      : 0.299 * image.pixels[i] + 0.587 * image.pixels[plane + i] + 0.114 * image.pixels[2 * plane + i];
      out.pixels[i] = static_cast<uint8_t>(std::lround(std::min(255.0, v)));
    } else {
      for (int64_t c = 0; c < 3; ++c) out.pixels[c * plane + i] = image.pixels[(colour == 1 ? 0 : c) * plane + i];
    }
  }
  return out;
}

Image resize(const Image& image, int64_t height, int64_t width) {
  VIT_CHECK(height > 0 && width > 0, "image", "cannot resize to {}x{}", height, width);
  if (height == image.height && width == image.width) return image;
  Image out{image.channels, height, width, std::vector<uint8_t>(static_cast<size_t>(image.channels * height * width))};
  for (int64_t c = 0; c < image.channels; ++c) {
    const int ok =
        stbir_resize_uint8(image.pixels.data() + c * image.height * image.width, static_cast<int>(image.width),
                           static_cast<int>(image.height), 0, out.pixels.data() + c * height * width,
                           static_cast<int>(width), static_cast<int>(height), 0, 1);
    VIT_CHECK(ok, "image", "resize {}x{} -> {}x{} failed", image.height, image.width, height, width);
  }
  return out;
}

namespace {

enum class Format { Png, Jpeg, Bmp };

// An image's bytes in one of stb's formats (1 or 3 channels).
std::vector<uint8_t> encode(const Image& image, Format format) {
  VIT_CHECK(image.channels == 1 || image.channels == 3, "image", "{} needs 1 or 3 channels, not {}",
            format == Format::Png    ? "PNG"
            : format == Format::Jpeg ? "JPEG"
                                     : "BMP",
            image.channels);
  std::vector<uint8_t> interleaved(image.pixels.size());
  const int64_t plane = image.height * image.width;
  for (int64_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < image.channels; ++c) interleaved[i * image.channels + c] = image.pixels[c * plane + i];
  }
  std::vector<uint8_t> bytes;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<uint8_t>*>(context);
    out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  const int w = static_cast<int>(image.width), h = static_cast<int>(image.height), c = static_cast<int>(image.channels);
  int ok = 0;
  switch (format) {
    case Format::Png:
      ok = stbi_write_png_to_func(append, &bytes, w, h, c, interleaved.data(), w * c);
      break;
    case Format::Jpeg:
      ok = stbi_write_jpg_to_func(append, &bytes, w, h, c, interleaved.data(), 95);
      break;
    case Format::Bmp:
      ok = stbi_write_bmp_to_func(append, &bytes, w, h, c, interleaved.data());
      break;
  }
  VIT_CHECK(ok, "image", "{} encoding failed", format == Format::Png ? "PNG" : format == Format::Jpeg ? "JPEG" : "BMP");
  return bytes;
}

}  // namespace

std::vector<uint8_t> encode_png(const Image& image) { return encode(image, Format::Png); }

void write_png(const std::string& path, const Image& image, Existing existing) {
  const std::vector<uint8_t> bytes = encode_png(image);
  write_file_atomically("image", path, bytes.data(), bytes.size(), existing);
}

void write_image(const std::string& path, const Image& image, Existing existing) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  Format format = Format::Png;
  if (ext == ".jpg" || ext == ".jpeg")
    format = Format::Jpeg;
  else if (ext == ".bmp")
    format = Format::Bmp;
  else
    VIT_CHECK(ext == ".png", "image", "{}: cannot tell the image format from '{}' (write .png, .jpg or .bmp)", path,
              ext);
  const std::vector<uint8_t> bytes = encode(image, format);
  write_file_atomically("image", path, bytes.data(), bytes.size(), existing);
}

}  // namespace vit::data
