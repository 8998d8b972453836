// The safetensors format (huggingface/safetensors): u64 little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then
// the tensor bytes. Reading memory-maps the file and validates everything before use: header
// size (<= 100 MB) and JSON, dtypes, shapes, offsets inside the data and not overlapping,
// byte lengths matching shape x dtype. F16/BF16 are widened to F32, I32 to I64 on load. A file
// that is plainly something else (a PNG, a zip archive, ...) is named as such.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace vit::io {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order of data offsets
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const;
  // The tensor called name; throws "[safetensors] FILE: no tensor 'name'" if absent.
  const Tensor& get(const std::string& name) const;
  std::string path;
};

// Reads a whole file. Throws vit::Error naming the file and what is wrong.
SafetensorsFile load_safetensors(const std::string& path);
// Parses an in-memory image of a file (the same checks); `name` is used in error messages.
SafetensorsFile parse_safetensors(std::shared_ptr<std::vector<char>> bytes, const std::string& name);

// Writes tensors (F32, F64 or I64) and string metadata. Writes to path + ".tmp", flushes and
// renames, so an existing file is replaced only by a complete one.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace vit::io
