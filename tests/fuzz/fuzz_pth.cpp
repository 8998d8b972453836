// Fuzz target: a torch.save file from bytes: the zip directory (minizip), entry names, CRCs, the
// pickle, and the tensors' storages, offsets and strides.
#include <memory>
#include <vector>

#include "fuzz_target.h"
#include "io/weights_file.h"

VIT_FUZZ_TARGET({
  auto bytes = std::make_shared<std::vector<char>>(reinterpret_cast<const char*>(data),
                                                   reinterpret_cast<const char*>(data) + size);
  const vit::io::ZipArchive zip = vit::io::ZipArchive::from_bytes(bytes, "fuzz.pth");
  const vit::io::WeightsFile f = vit::io::read_torch_zip(zip);
  for (const auto& [name, t] : f.tensors) (void)t.numel();
})
