// Fuzz target: the safetensors reader (header JSON, dtypes, shapes, offsets, overlap checks)
// and a read of every tensor it returns.
#include <memory>
#include <vector>

#include "fuzz_target.h"
#include "io/safetensors.h"

VIT_FUZZ_TARGET({
  auto bytes = std::make_shared<std::vector<char>>(data, data + size);
  const vit::io::WeightsFile file = vit::io::parse_safetensors(bytes, "fuzz.safetensors");
  double sum = 0;
  for (const auto& [name, t] : file.tensors) {
    if (t.numel() > 0) sum += t.to(vit::DType::F64).contiguous().data<double>()[t.numel() - 1];
  }
  (void)sum;
})
