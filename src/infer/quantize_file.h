// `vit quantize` and `vit convert` as library calls (the CLI, the C++ facade and the Python module
// share them): load any checkpoint vit reads (io/weights_file.h: safetensors, torch.save .pth/.bin,
// JAX .npz), quantize its Linears (infer/quantize.h) and write the int8 copy; or (dtype BF16) write
// a copy with its Linear and convolution weights stored as bfloat16 (checkpoint/bf16_format.h),
// about half the size; or (dtype F32, vit convert) write it unchanged as one of our checkpoints,
// with the config, layout, family, class names and evaluation transform in its metadata, so that it
// is converted once and memory-mapped afterwards.
#pragma once

#include <cstdint>
#include <string>

#include "infer/load_model.h"
#include "infer/quantize.h"

namespace vit::infer {

enum class QuantizeDtype { Int8, BF16, F32 };

// A bfloat16 copy: what was rounded, and by how much.
struct Bf16Summary {
  int64_t tensors = 0;           // weights stored as bf16
  int64_t bf16_values = 0;       // their elements
  int64_t float_values = 0;      // the parameters left in float32
  double max_abs_error = 0.0;    // largest |w - bf16(w)|
  double max_rel_rms_error = 0;  // the largest per-tensor RMS error / RMS weight
};

struct QuantizeFileResult {
  QuantizeDtype dtype = QuantizeDtype::Int8;
  QuantizeSummary summary;  // int8
  Bf16Summary bf16;         // bf16
  std::string layout;       // of the input file
  double seconds = 0.0;
  uint64_t in_bytes = 0, out_bytes = 0;
};

// Refuses an empty `out`, a directory, the input itself, an existing file without `overwrite`,
// and an input that is already int8, naming the path. bits: the int8 weights' (8, or 7 for the
// older scheme); unused for BF16. `names` says how the caller spelled the output and overwrite options in messages (the
// command's flags by default; the library's and Python's keywords).
struct QuantizeNames {
  std::string out = "--out", overwrite = "--overwrite";
};
QuantizeFileResult quantize_file(const std::string& in, const std::string& out, const LoadSettings& options,
                                 bool overwrite, int bits = 8, const QuantizeNames& names = {},
                                 QuantizeDtype dtype = QuantizeDtype::Int8);

// vit convert: quantize_file with dtype F32 (the weights as loaded: a PyTorch file's EMA state dict
// with options.weights = Ema, resampled to options.image_size when given).
QuantizeFileResult convert_file(const std::string& in, const std::string& out, const LoadSettings& options,
                                bool overwrite, const QuantizeNames& names = {});

}  // namespace vit::infer
