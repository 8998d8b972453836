// The weights readers' common result (see weights.h).
#include "io/weights.h"

#include <algorithm>

#include "core/check.h"
#include "core/printable.h"

namespace vit::io {

const char* format_name(WeightsFormat format) {
  switch (format) {
    case WeightsFormat::Safetensors:
      return "safetensors";
    case WeightsFormat::TorchZip:
      return "PyTorch (torch.save)";
    case WeightsFormat::Npz:
      return "NumPy .npz";
    case WeightsFormat::Onnx:
      return "ONNX";
  }
  return "?";
}

bool WeightsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& kv) { return kv.first == name; });
}

const Tensor& WeightsFile::get(const std::string& name) const {
  for (const auto& [key, t] : tensors) {
    if (key == name) return t;
  }
  fail("safetensors", "{}: no tensor '{}'", path, printable(name));
}

}  // namespace vit::io
