// The safetensors format (huggingface/safetensors): u64 little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then
// the tensor bytes. Reading memory-maps the file and validates everything before use: header
// size (<= 100 MB) and JSON, dtypes, shapes, offsets inside the data and not overlapping,
// byte lengths matching shape x dtype. F16/BF16 are widened to F32, I32 to I64 on load; I8 (quantized weights) is kept
// as int8. A file that is plainly something else (a PNG, a zip archive, ...) is named as such.
//
// Checksum (optional, written for vit checkpoints): __metadata__["checksum"] = "xxh64:<16 hex>",
// the XXH64 (io/checksum.h) of the data section (every byte after the header), seeded with the
// XXH64 of the header JSON without that one entry, re-serialised with sorted keys and no spaces
// (Python: json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)).
// Reading never enforces it: scan_contents computes it, and the caller compares.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/output_file.h"
#include "core/tensor.h"
#include "io/weights.h"

namespace vit::io {

inline constexpr const char* kChecksumKey = "checksum";

// What a file whose first bytes are `data` plainly is, by its magic number ("a PNG image", "a
// GGUF model", ...), or "" when they tell nothing.
std::string known_format(const char* data, uint64_t size);

ContentScan scan_contents(const WeightsFile& file, bool checksum, bool finite);
// The NaN/Inf search over tensors in memory (float32 / float64; the others are always finite).
ContentScan scan_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors);
// The same over elements [first, last) of stored values of `dtype` ("F32", "F64", "F16", "BF16")
// at p, counted into `out` under `name` (element indices as given).
void scan_floats(const char* p, int64_t first, int64_t last, const std::string& dtype, const std::string& name,
                 ContentScan& out);

// Reads a whole file. Throws vit::Error naming the file and what is wrong.
WeightsFile load_safetensors(const std::string& path);
// Parses an in-memory image of a file (the same checks); `name` is used in error messages.
WeightsFile parse_safetensors(std::shared_ptr<std::vector<char>> bytes, const std::string& name);

// Tensors to store as BF16: name -> the bfloat16 bits of the float32 tensor of that name (one per
// element, row-major), rounded by the caller (kernels::to_bf16: round to nearest even).
using Bf16Bits = std::map<std::string, std::vector<uint16_t>>;

// Writes tensors (F32, F64, I64 or I8; those named in `bf16` as BF16, from the bits given) and
// string metadata, with a checksum in the metadata when asked. Writes to a temporary file of its own (an AtomicFile,
// core/output_file.h), flushes, fsyncs and renames, so an existing file is replaced only by a complete one, even with
// several writers. Throws before renaming, leaving path untouched and no temporary file; errors name path, never the
// temporary file.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {}, bool checksum = false,
                      const Bf16Bits& bf16 = {});

// temp_path: core/output_file.h (the one rule for written files), here for the writers above io.
using vit::temp_path;

}  // namespace vit::io
