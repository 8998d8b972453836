// An ONNX model file (a protobuf ModelProto, onnx.proto) read into plain data: the graph's nodes in
// file order (ONNX requires them topologically sorted), its initializers and Constant nodes' values
// as tensors, its inputs and outputs, the opset and metadata_props. Read with Debian's libonnx
// (its generated classes, libonnx-dev) and protobuf; no protobuf type leaves this room. What is not
// plain data vit can use is refused naming it: subgraphs, tensors of a type vit does not read,
// dims that are negative or whose product overflows, data of the wrong size, external data outside
// the model's folder (absolute paths, '..', links leaving it), files over protobuf's 2 GiB limit.
// What the graph computes is not interpreted here: model/layouts/onnx.h recognises ViT graphs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace vit::io {

struct OnnxAttribute {
  enum class Kind { Int, Float, Ints, Floats, String, Tensor, Other };
  std::string name;
  Kind kind = Kind::Other;
  int64_t i = 0;
  double f = 0.0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string s;
  Tensor t;
};

struct OnnxNode {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional input
  std::vector<OnnxAttribute> attributes;
  const OnnxAttribute* attribute(const std::string& name) const;  // nullptr if absent
  // The node as messages name it: "node 'name' (Op)", or "node #i (Op)" without a name.
  std::string label;
};

// A graph input or output: its name, element type name ("float", "int64", ...) and dims (-1 for a
// symbolic or unknown one).
struct OnnxValue {
  std::string name, type;
  std::vector<int64_t> dims;
};

struct OnnxModel {
  std::string path;
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default (ai.onnx) domain
  std::string producer_name, producer_version;
  std::map<std::string, std::string> metadata;  // metadata_props
  std::vector<OnnxNode> nodes;
  // Initializers (file order) then Constant nodes' values, by name: float32 (float16/double
  // widened or narrowed to it), int64 (int32 widened), int8; uint8 and bool as int64.
  std::vector<std::pair<std::string, Tensor>> constants;
  std::vector<OnnxValue> inputs, outputs;  // graph inputs that are not initializers; outputs
  int64_t file_bytes = 0;
  const Tensor* constant(const std::string& name) const;
};

// Reads PATH ("[onnx] PATH: ..." for anything refused). External data is read from files beside it.
OnnxModel read_onnx(const std::string& path);
// The same from bytes in memory (fuzzing, tests): external data is refused unless base_dir names
// the folder to read it from.
OnnxModel parse_onnx(const void* data, size_t size, const std::string& path, const std::string& base_dir = "");

// Whether the first bytes look like a ModelProto (field 1, ir_version, a small varint; then another
// field): what load_weights_file tells ONNX files apart by.
bool looks_like_onnx(const unsigned char* head, size_t size);
// PATH ends in .onnx or its first bytes look like a ModelProto (open_regular_file's errors).
bool is_onnx_file(const std::string& path);

}  // namespace vit::io
