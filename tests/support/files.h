// Temporary directories and small generated data files for tests (MNIST IDX, CIFAR-10, PNG).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vit::testing {

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_bytes(const std::string& path);
std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes);

// IDX files for n images of rows x cols with labels; pixel value of image i at p is (i * 7 + p) % 256.
std::vector<uint8_t> idx_images(int64_t n, int64_t rows, int64_t cols);
std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels);
// Writes {train,t10k}-{images-idx3,labels-idx1}-ubyte into dir: a learnable toy task where the
// label k is a texture: bright horizontal stripes every k + 2 rows, over faint noise.
void write_toy_mnist(const std::string& dir, int64_t train, int64_t test, int64_t size = 28);

// An image folder dataset under dir: train/cK/iN.EXT and test/cK/iN.EXT for `classes` classes
// (c0, c1, ...), `train`/`test` images per class, each 3 x height x width with pixel p of image N
// of class K = (K * 50 + N * 7 + p) % 256 (so every image differs), written as PNG, JPEG or BMP by
// `ext`. Returns the number of images written.
int64_t write_photo_folder(const std::string& dir, int64_t classes, int64_t train, int64_t test, int64_t height,
                           int64_t width, const std::string& ext = "png");

}  // namespace vit::testing
