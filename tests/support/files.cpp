// Test file helpers (see files.h).
#include "support/files.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "data/image.h"

namespace vit::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "vit_test_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 32);
  z.next_in = const_cast<uint8_t*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

static void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

std::vector<uint8_t> idx_images(int64_t n, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out;
  put_u32(out, 0x00000803);
  put_u32(out, static_cast<uint32_t>(n));
  put_u32(out, static_cast<uint32_t>(rows));
  put_u32(out, static_cast<uint32_t>(cols));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < rows * cols; ++p) out.push_back(static_cast<uint8_t>((i * 7 + p) % 256));
  }
  return out;
}

std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out;
  put_u32(out, 0x00000801);
  put_u32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void write_toy_mnist(const std::string& dir, int64_t train, int64_t test, int64_t size) {
  std::filesystem::create_directories(dir);
  for (const auto& [prefix, n] : {std::pair<std::string, int64_t>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> images, labels;
    put_u32(images, 0x00000803);
    put_u32(images, static_cast<uint32_t>(n));
    put_u32(images, static_cast<uint32_t>(size));
    put_u32(images, static_cast<uint32_t>(size));
    for (int64_t i = 0; i < n; ++i) {
      const auto label = static_cast<uint8_t>((i * 3 + (prefix == "t10k")) % 10);
      labels.push_back(label);
      for (int64_t y = 0; y < size; ++y) {
        for (int64_t x = 0; x < size; ++x) {
          const bool stripe = y % (label + 2) == 0;
          images.push_back(static_cast<uint8_t>(stripe ? 200 + (x + i) % 50 : (x * y + i) % 20));
        }
      }
    }
    write_bytes(dir + "/" + prefix + "-images-idx3-ubyte", images);
    write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte", idx_labels(labels));
  }
}

int64_t write_photo_folder(const std::string& dir, int64_t classes, int64_t train, int64_t test, int64_t height,
                           int64_t width, const std::string& ext) {
  int64_t written = 0;
  for (const auto& [split, n] : {std::pair<std::string, int64_t>{"train", train}, {"test", test}}) {
    for (int64_t k = 0; k < classes; ++k) {
      const std::string folder = dir + "/" + split + "/c" + std::to_string(k);
      std::filesystem::create_directories(folder);
      for (int64_t i = 0; i < n; ++i) {
        data::Image image{3, height, width, std::vector<uint8_t>(static_cast<size_t>(3 * height * width))};
        for (size_t p = 0; p < image.pixels.size(); ++p) {
          image.pixels[p] = static_cast<uint8_t>((k * 50 + i * 7 + static_cast<int64_t>(p)) % 256);
        }
        data::write_image(folder + "/i" + std::to_string(i) + "." + ext, image);
        ++written;
      }
    }
  }
  return written;
}

}  // namespace vit::testing
