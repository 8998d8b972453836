// Fuzz target: the CIFAR-10 binary batch reader (record size, labels).
#include "data/dataset.h"
#include "fuzz_target.h"

VIT_FUZZ_TARGET({
  vit::data::Dataset d;
  d.channels = 3;
  d.height = d.width = 32;
  vit::data::append_cifar10_batch(data, size, "fuzz.bin", d);
  if (d.size() > 0) (void)d.image(d.size() - 1)[d.image_bytes() - 1];
})
