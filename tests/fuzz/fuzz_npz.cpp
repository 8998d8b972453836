// Fuzz target: a NumPy .npz from bytes: the zip directory, stored and deflated entries (the
// inflate budget), CRCs and each .npy inside.
#include <memory>
#include <vector>

#include "fuzz_target.h"
#include "io/weights_file.h"

VIT_FUZZ_TARGET({
  auto bytes = std::make_shared<std::vector<char>>(reinterpret_cast<const char*>(data),
                                                   reinterpret_cast<const char*>(data) + size);
  const vit::io::ZipArchive zip = vit::io::ZipArchive::from_bytes(bytes, "fuzz.npz");
  const vit::io::WeightsFile f = vit::io::read_npz(zip);
  for (const auto& [name, t] : f.tensors) (void)t.numel();
})
