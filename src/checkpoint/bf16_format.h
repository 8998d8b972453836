// bfloat16 weights in a checkpoint file (`vit quantize --dtype bf16`): the weights that
// `--precision bf16` runs in bfloat16 -- every float32 Linear's and convolution's (the patch
// projection, a convolutional stem) -- stored as BF16, rounded to nearest even (kernels::to_bf16);
// everything else (tokens, position embedding, LayerNorm, biases) stays float32. The metadata entry
//   "storage": {"scheme": "vit-bf16-1", "dtype": "BF16", "rounding": "nearest-even",
//               "tensors": [the BF16 weights' names]}
// says so. Loading widens BF16 to float32 exactly (io/safetensors.h), so such a file runs float32
// by default, and `--precision bf16` rounds each weight back to itself: the same numbers as bf16
// inference of the float32 file it came from. Reading checks the entry against the tensors as
// stored. Part of the checkpoint format (checkpoint.h writes and reads it).
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/vision_transformer.h"

namespace vit::checkpoint {

inline constexpr const char* kBf16Scheme = "vit-bf16-1";
inline constexpr const char* kStorageKey = "storage";

// The names (timm's) of the weights stored as BF16: every float32 Linear's and Conv2d's weight, in
// module order. Throws for an int8 model (its Linears are int8 already).
std::vector<std::string> bf16_weight_names(const model::VisionTransformer& model);

// Those weights' bfloat16 bits (kernels::to_bf16), for io::save_safetensors.
io::Bf16Bits bf16_weight_bits(const model::VisionTransformer& model);

// The "storage" metadata value for these names.
std::string bf16_storage_metadata(const std::vector<std::string>& names);

// Read side: the "storage" metadata value against the file as stored. The scheme must be
// kBf16Scheme, each listed tensor a weight (not optimizer./ema.) stored as BF16, and no other
// weight stored as BF16. Throws "[checkpoint] FILE: ..." naming the tensor. Returns the names.
std::vector<std::string> check_bf16_storage(const io::WeightsFile& file, const std::string& metadata);

// The names listed in a "storage" value that check_bf16_storage accepted ("" gives none).
std::vector<std::string> bf16_storage_names(const std::string& metadata);

}  // namespace vit::checkpoint
