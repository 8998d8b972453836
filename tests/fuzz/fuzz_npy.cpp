// Fuzz target: the .npy reader (magic, version, header dict, dtype, shape, data size).
#include "fuzz_target.h"
#include "io/npy.h"

VIT_FUZZ_TARGET({
  const vit::Tensor t = vit::io::parse_npy(data, size, "fuzz.npy");
  (void)t.numel();
})
