// What every weights reader returns (io/weights_file.h tells the formats apart; io/safetensors.h,
// the torch.save and .npz readers fill it): named tensors in file order, string metadata, the
// format they came from, and what only a torch.save training checkpoint carries.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace vit::io {

enum class WeightsFormat {
  Safetensors,  // .safetensors (ours, timm, torchvision, Hugging Face)
  TorchZip,     // torch.save's zip format (.pth, .pt, pytorch_model.bin)
  Npz,          // NumPy .npz (JAX / big_vision checkpoints)
  Onnx,         // an ONNX model (io/onnx.h; read by infer's load_model, not as named tensors)
};

// "safetensors", "PyTorch (torch.save)", "NumPy .npz": for messages.
const char* format_name(WeightsFormat format);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// What a search of tensor bytes found (scan_contents: one pass over the data section, block by
// block, each block hashed and scanned while in cache).
struct ContentScan {
  std::string checksum;          // with `checksum`: "xxh64:..." as save_safetensors writes it
  int64_t nonfinite_count = 0;   // with `finite`: NaN/Inf values in the float tensors
  std::string nonfinite_tensor;  // the first one: its tensor, element index and value
  int64_t nonfinite_index = -1;
  double nonfinite_value = 0.0;
};

// A torch.save training checkpoint: where its state dict was ("" at the top level, "model",
// "state_dict", ...), its EMA state dict ("state_dict_ema", "model_ema", ...) and the other
// top-level entries, skipped unread ("epoch (int)", "args (argparse.Namespace, never run)").
struct TorchCheckpoint {
  std::string weights_key;
  NamedTensors ema;
  std::string ema_key;
  std::vector<std::string> skipped;
  std::string stripped_prefix;  // "module." (DDP) or "_orig_mod." (torch.compile), removed from every key
  // Tensors already searched for NaN/Inf while their bytes were read (the float32 storages, in the
  // same pass as their CRC), and what that found: scan_tensors need not read them again.
  std::vector<std::string> prescanned;
  ContentScan prescan;
};

struct WeightsFile {
  WeightsFormat format = WeightsFormat::Safetensors;
  std::string path;
  NamedTensors tensors;  // safetensors: in file order of data offsets
  std::map<std::string, std::string> metadata;
  TorchCheckpoint torch;  // TorchZip only

  bool contains(const std::string& name) const;
  // The tensor called name; throws "[safetensors] FILE: no tensor 'name'" if absent.
  const Tensor& get(const std::string& name) const;

  // Safetensors only: the data section, and where each tensor lies in it as stored (what
  // scan_contents reads).
  struct Span {
    std::string name, dtype;      // dtype as stored: "F32", "F16", "BF16", "F64", "I64", "I32", "I8"
    uint64_t begin = 0, end = 0;  // byte offsets into the data section
  };
  std::vector<Span> spans;  // in data order
  const char* data = nullptr;
  uint64_t data_size = 0;
  uint64_t header_hash = 0;  // with a "checksum" in __metadata__: the checksum's seed

  std::shared_ptr<void> bytes;  // keeps the mapping (or buffer) alive
};

}  // namespace vit::io
