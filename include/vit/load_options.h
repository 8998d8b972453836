// <vit/load_options.h>: how to read a model file, as every door names it: `vit predict`'s flags
// (--heads, --no-strict, ...), Python's keywords (vit.load(path, heads=4, strict=False)) and this
// struct's fields (the C++ door, <vit/vit.h>). The options are declared once, in the library's
// infer layer (names, help, checks and messages, infer/load_options.h); each field here is the
// option of the same name. A field left at its default lets the file decide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vit {

struct LoadOptions {
  int64_t heads = 0;       // attention heads (0: from the file, else standard for the width)
  std::string layout{};    // "timm", "torchvision", "huggingface", "jax" ("": detected from the keys)
  double eps = 0.0;        // LayerNorm eps (0: the layout's / family's)
  std::string act{};       // MLP activation override ("gelu" for a LAION CLIP in timm's names)
  int64_t image_size = 0;  // > 0: run at this resolution (position embedding resampled)
  bool strict = true;      // false: missing / unexpected keys are listed (Model::skipped_keys)
  bool ema = false;        // the EMA weights: ours, or a PyTorch file's state_dict_ema / model_ema
  bool raw = false;        // our checkpoints: the raw weights
  bool allow_nonfinite = false;
  // Preprocessing over the checkpoint's own (vit predict's --resize, --crop, --interpolation,
  // --mean, --std): what load_image / decode_image apply.
  int64_t resize = 0;                 // > 0: resize the shorter side to this
  int64_t crop = -1;                  // >= 0: center crop to this (0: none)
  std::string interpolation{};        // "bilinear" or "bicubic" ("": the checkpoint's)
  std::vector<double> mean{}, std{};  // one value, or one per channel
  // "fp32", or "bf16": the Linear layers in bfloat16 with float32 accumulation (AVX512_BF16 CPUs;
  // elsewhere a correct but slow emulation), as --precision bf16.
  std::string precision = "fp32";
};

}  // namespace vit
