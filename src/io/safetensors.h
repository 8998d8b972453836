// The safetensors format (huggingface/safetensors): u64 little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then
// the tensor bytes. Reading memory-maps the file and validates everything before use: header
// size (<= 100 MB) and JSON, dtypes, shapes, offsets inside the data and not overlapping,
// byte lengths matching shape x dtype. F16/BF16 are widened to F32, I32 to I64 on load.
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

// Writes tensors (F32, F64 or I64) and string metadata. Writes to a temporary file of its own
// (temp_path), flushes, fsyncs and renames, so an existing file is replaced only by a complete one,
// even with several writers. Throws before renaming, leaving path untouched and no temporary file.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A temporary name beside `path` that no other writer uses: path + ".tmp.<pid>.<n>", n counting
// this process's calls, so two processes (or threads) replacing the same file never share one.
std::string temp_path(const std::string& path);

}  // namespace vit::io
