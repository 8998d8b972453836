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

namespace vit::io {

// What a search of tensor bytes found (scan_contents: one pass over the data section, block by
// block, each block hashed and scanned while in cache).
struct ContentScan {
  std::string checksum;          // with `checksum`: "xxh64:..." as save_safetensors writes it
  int64_t nonfinite_count = 0;   // with `finite`: NaN/Inf values in the float tensors
  std::string nonfinite_tensor;  // the first one: its tensor, element index and value
  int64_t nonfinite_index = -1;
  double nonfinite_value = 0.0;
};

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order of data offsets
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const;
  // The tensor called name; throws "[safetensors] FILE: no tensor 'name'" if absent.
  const Tensor& get(const std::string& name) const;
  std::string path;

  // What scan_contents reads: the data section, and where each tensor lies in it as stored.
  struct Span {
    std::string name, dtype;      // dtype as stored: "F32", "F16", "BF16", "F64", "I64", "I32", "I8"
    uint64_t begin = 0, end = 0;  // byte offsets into the data section
  };
  std::vector<Span> spans;  // in data order (empty for the formats below: their tensors are scanned)

  // What the file is: "safetensors", or (io/weights_file.h) "pytorch" (a torch.save zip) or "npz".
  std::string format = "safetensors";
  // A torch.save training checkpoint: where its state dict was ("" at the top level, "model",
  // "state_dict", ...), its EMA state dict ("state_dict_ema", "model_ema", ...) and the other
  // top-level entries, skipped unread ("epoch (int)", "args (argparse.Namespace, never run)").
  std::string weights_key;
  std::vector<std::pair<std::string, Tensor>> ema;
  std::string ema_key;
  std::vector<std::string> skipped;
  std::string stripped_prefix;  // "module." (DDP) or "_orig_mod." (torch.compile), removed from every key
  // Tensors already searched for NaN/Inf while their bytes were read (a .pth's float32 storages,
  // in the same pass as their CRC), and what that found: scan_tensors need not read them again.
  std::vector<std::string> prescanned;
  ContentScan prescan;
  std::shared_ptr<void> bytes;  // keeps the mapping (or buffer) alive
  const char* data = nullptr;   // the data section
  uint64_t data_size = 0;
  uint64_t header_hash = 0;  // with a "checksum" in __metadata__: the checksum's seed
};

inline constexpr const char* kChecksumKey = "checksum";

ContentScan scan_contents(const SafetensorsFile& file, bool checksum, bool finite);
// The NaN/Inf search over tensors in memory (float32 / float64; the others are always finite).
ContentScan scan_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors);
// The same over elements [first, last) of stored values of `dtype` ("F32", "F64", "F16", "BF16")
// at p, counted into `out` under `name` (element indices as given).
void scan_floats(const char* p, int64_t first, int64_t last, const std::string& dtype, const std::string& name,
                 ContentScan& out);

// Reads a whole file. Throws vit::Error naming the file and what is wrong.
SafetensorsFile load_safetensors(const std::string& path);
// Parses an in-memory image of a file (the same checks); `name` is used in error messages.
SafetensorsFile parse_safetensors(std::shared_ptr<std::vector<char>> bytes, const std::string& name);

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
