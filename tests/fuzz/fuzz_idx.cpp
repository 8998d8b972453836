// Fuzz target: the MNIST IDX reader (raw or gzip). The input holds both files: a 2-byte
// little-endian length L, then L bytes of the labels file, then the images file.
#include <algorithm>
#include <vector>

#include "data/dataset.h"
#include "fuzz_target.h"

VIT_FUZZ_TARGET({
  if (size < 2) return 0;
  const size_t labels_len = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  std::vector<uint8_t> labels(data + 2, data + 2 + labels_len);
  std::vector<uint8_t> images(data + 2 + labels_len, data + size);
  const vit::data::Dataset d = vit::data::parse_mnist_idx(std::move(images), std::move(labels), "images", "labels");
  if (d.size() > 0) (void)d.image(d.size() - 1)[d.image_bytes() - 1];
})
