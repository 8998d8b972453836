// The Open Inference Protocol (KServe v2, as Triton, KServe, Seldon MLServer and OpenVINO Model
// Server speak it) over HTTP/REST: the parsing of an inference request and the writing of its
// answer, JSON and the binary tensor data extension (the endpoints: serve/oip/endpoints.h).
// A request: {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "parameters"?, "data"?}],
// "outputs"?: [{"name", "parameters"?: {"binary_data"?, "classification"?}}]}. Our models take one
// input, either "input": FP32 (B, C, H, W) (FP64 is accepted and narrowed), its data a row-major list
// (flat, or nested to the shape), or "image": BYTES [B] (or [B, 1]), each element an encoded image
// (JPEG, PNG, BMP; sizes may differ), its data a list of base64 strings, decoded and preprocessed
// by the server as `vit predict IMAGE` does ("input" with datatype BYTES is taken the same way).
// With the binary extension the data are raw little-endian bytes after the JSON: the header
// Inference-Header-Content-Length gives the JSON's length, and each binary input says its byte
// count in parameters.binary_data_size (BYTES elements each as a 4-byte little-endian length and
// the bytes, as Triton writes them). Outputs: "logits" FP32 (B, K) for a
// classifier, "embedding" FP32 (B, D) (the model's default pooling); asked for by name, or all of
// them when "outputs" is absent. {"classification": k} on logits answers Triton's way: a BYTES
// (B, k) tensor of "score:index:label" strings, the scores softmax probabilities. Binary outputs
// ("binary_data": true on an output, or "binary_data_output": true in the request's parameters)
// come after the JSON, each output's parameters.binary_data_size telling its bytes (BYTES
// elements as a 4-byte little-endian length and the bytes). The request id is echoed.
// Every malformed request is a vit::Error naming what is wrong (the server answers 400 {"error"}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vit::serve::oip {

inline constexpr const char* kInputName = "input";
inline constexpr const char* kImageName = "image";  // the BYTES input: encoded images
inline constexpr const char* kLogits = "logits";
inline constexpr const char* kEmbedding = "embedding";
inline constexpr int kMaxJsonDepth = 64;  // nesting deeper than this is refused before parsing

struct RequestedOutput {
  std::string name;
  bool binary = false;
  int64_t classification = 0;  // > 0: top-k as BYTES "score:index:label"
};

struct InferRequest {
  std::optional<std::string> id;
  Tensor input;                          // (B, C, H, W) float32, or undefined when images are given
  std::vector<std::string> images;       // a BYTES input's elements: encoded images (not yet decoded)
  std::vector<RequestedOutput> outputs;  // empty: every output the model has, as JSON
  bool binary_outputs = false;           // parameters.binary_data_output
};

// What the model takes: the input's (C, H, W), to check the request's shape against.
struct ModelShape {
  int64_t channels = 0, height = 0, width = 0;
};

// An input's name, datatype and shape, checked against what the model takes (either door: the
// JSON of HTTP, gRPC's message).
struct InputSpec {
  std::string name, datatype, shape_text;
  Shape dims;
  int64_t numel = 0;   // values (a tensor) or elements (BYTES)
  size_t element = 4;  // bytes per value as sent (0 for BYTES)
  bool bytes() const { return datatype == "BYTES"; }
};
InputSpec check_input_spec(const std::string& name, const std::string& datatype, const Shape& dims,
                           const ModelShape& shape);
// A tensor input's values from raw little-endian bytes (exactly its shape's byte count).
Tensor tensor_from_raw(const InputSpec& spec, const char* data, uint64_t bytes);
// A BYTES input's elements from raw bytes: each a 4-byte little-endian length and that many bytes,
// exactly spec.numel of them filling `bytes`.
std::vector<std::string> bytes_elements(const InputSpec& spec, const char* data, uint64_t bytes);
// Appends one BYTES element as Triton writes it: a 4-byte little-endian length, then the bytes.
void append_bytes_element(std::string& out, const std::string& element);
// A base64 string's bytes (RFC 4648, '+/' or '-_', padding optional, whitespace skipped); throws
// naming `what` and the offending character.
std::string base64_decode(const std::string& text, const std::string& what);

// Parses a body (JSON, or JSON + binary tensors when header_length is given) into an input batch.
// header_length: the Inference-Header-Content-Length header's value ("" when absent).
InferRequest parse_infer_request(const std::string& body, const std::string& header_length, const ModelShape& shape);

struct OutputTensor {
  std::string name;
  std::string datatype;  // "FP32" or "BYTES"
  Shape shape;
  Tensor values;                     // FP32
  std::vector<std::string> strings;  // BYTES, row-major
  bool binary = false;
};

struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when binary data follows the JSON
};

EncodedResponse encode_infer_response(const std::string& model_name, const std::string& version,
                                      const std::optional<std::string>& id, const std::vector<OutputTensor>& outputs);

// Refuses JSON text nested deeper than kMaxJsonDepth (arrays/objects), before a parser recurses.
void check_json_depth(const std::string& text, const char* what);

}  // namespace vit::serve::oip
