// Open Inference Protocol requests and answers (see protocol.h).
#include "serve/oip/protocol.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "serve/http/message.h"
#include "serve/oip/request_json.h"

namespace vit::serve::oip {
namespace {

using json = nlohmann::json;
constexpr const char* kOp = "infer";

}  // namespace

void check_json_depth(const std::string& text, const char* what) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      VIT_CHECK(++depth <= kMaxJsonDepth, kOp, "{} nests arrays/objects more than {} deep", what, kMaxJsonDepth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

namespace {

// The JSON part of a body: all of it, or the Inference-Header-Content-Length bytes before the binary data.
size_t json_length(const std::string& body, const std::string& header_length) {
  if (header_length.empty()) return body.size();
  const bool digits = header_length.size() <= 18 && header_length.find_first_not_of("0123456789") == std::string::npos;
  VIT_CHECK(digits, kOp, "Inference-Header-Content-Length '{}' is not a byte count", header_length);
  const size_t bytes = std::stoull(header_length);
  VIT_CHECK(bytes <= body.size(), kOp, "Inference-Header-Content-Length {} is past the end of the {}-byte body", bytes,
            body.size());
  return bytes;
}

RequestJson parse_json(const std::string& text, const std::string& body, const std::string& header_length) {
  check_json_depth(text, "the request");
  try {
    return parse_request_json(text, text.size());
  } catch (const json::exception& e) {
    fail(kOp, "the request is not valid JSON ({}){}", e.what(),
         header_length.empty() && body.find('\0') != std::string::npos
             ? "; binary tensor data needs the Inference-Header-Content-Length header"
             : "");
  }
}

// An input's name, datatype and shape from its JSON, checked.
InputSpec parse_input_spec(const json& in, const ModelShape& shape) {
  VIT_CHECK(in.is_object(), kOp, "inputs[0] must be an object {{name, shape, datatype, data}}");
  VIT_CHECK(in.contains("name") && in["name"].is_string(), kOp, "inputs[0] has no \"name\"");
  const std::string name = in["name"].get<std::string>();
  VIT_CHECK(in.contains("datatype") && in["datatype"].is_string(), kOp, "input '{}' has no \"datatype\"", name);
  VIT_CHECK(in.contains("shape") && in["shape"].is_array(), kOp, "input '{}' has no \"shape\" array", name);
  Shape dims;
  for (const json& d : in["shape"]) {
    VIT_CHECK(d.is_number_integer(), kOp, "input '{}': shape entries must be integers, got {}", name, d.dump());
    dims.push_back(d.get<int64_t>());
  }
  return check_input_spec(name, in["datatype"].get<std::string>(), dims, shape);
}

// The input's values from the binary data after the JSON (parameters.binary_data_size bytes).
void read_binary_input(const json& in, const InputSpec& s, const std::string& body, size_t json_bytes,
                       const std::string& header_length, InferRequest& r) {
  const json& size = in["parameters"]["binary_data_size"];
  VIT_CHECK(size.is_number_unsigned(), kOp, "input '{}': parameters.binary_data_size must be a byte count", s.name);
  const uint64_t bytes = size.get<uint64_t>();
  VIT_CHECK(!header_length.empty(), kOp,
            "input '{}' is binary but the request has no Inference-Header-Content-Length header", s.name);
  VIT_CHECK(body.size() - json_bytes == bytes, kOp,
            "input '{}': {} bytes of binary data expected after the JSON header, the body has {}", s.name, bytes,
            body.size() - json_bytes);
  VIT_CHECK(!in.contains("data"), kOp, "input '{}' has both binary data and a \"data\" field", s.name);
  const char* p = body.data() + json_bytes;
  if (s.bytes()) {
    r.images = bytes_elements(s, p, bytes);
  } else {
    r.input = tensor_from_raw(s, p, bytes);
  }
}

// The input's values from its "data" list (flat, or nested to the shape), read while parsing.
void read_json_input(const json& in, RequestJson& parsed, const InputSpec& s, const std::string& body,
                     size_t json_bytes, InferRequest& r) {
  VIT_CHECK(in.contains("data"), kOp, "input '{}' has no \"data\" (nor binary_data_size)", s.name);
  VIT_CHECK(json_bytes == body.size(), kOp, "{} bytes follow the JSON but no input is binary",
            body.size() - json_bytes);
  const auto numel = static_cast<size_t>(s.numel);
  if (s.bytes()) {
    VIT_CHECK(parsed.data_read && parsed.data_textual, kOp,
              "input '{}': \"data\" must hold base64 strings (one encoded image each)", s.name);
    VIT_CHECK(parsed.data_values == numel, kOp, "input '{}': shape {} needs {} images, \"data\" has {}", s.name,
              s.shape_text, numel, parsed.data_values);
    r.images.reserve(numel);
    for (size_t i = 0; i < numel; ++i) {
      r.images.push_back(base64_decode(parsed.strings[i], fmt::format("input '{}' element {}", s.name, i)));
      std::string().swap(parsed.strings[i]);  // the text freed as its bytes come
    }
    return;
  }
  VIT_CHECK(parsed.data_read && parsed.data_numeric, kOp,
            "input '{}': \"data\" must hold numbers (a flat or nested list)", s.name);
  VIT_CHECK(parsed.data_values == numel, kOp, "input '{}': shape {} needs {} values, \"data\" has {}", s.name,
            s.shape_text, numel, parsed.data_values);
  r.input = Tensor::empty(s.dims);  // allocated once the body is known to hold its values
  std::copy(parsed.data.begin(), parsed.data.end(), r.input.data<float>());
}

// "outputs": each a name, with binary_data and classification parameters.
std::vector<RequestedOutput> parse_outputs(const json& list, bool binary_default) {
  VIT_CHECK(list.is_array(), kOp, "\"outputs\" must be an array");
  std::vector<RequestedOutput> outputs;
  for (const json& o : list) {
    VIT_CHECK(o.is_object() && o.contains("name") && o["name"].is_string(), kOp,
              "each of \"outputs\" must be an object with a \"name\"");
    RequestedOutput ro;
    ro.name = o["name"].get<std::string>();
    ro.binary = binary_default;
    if (o.contains("parameters")) {
      const json& p = o["parameters"];
      VIT_CHECK(p.is_object(), kOp, "output '{}': \"parameters\" must be an object", ro.name);
      if (p.contains("binary_data")) {
        VIT_CHECK(p["binary_data"].is_boolean(), kOp, "output '{}': binary_data must be true or false", ro.name);
        ro.binary = p["binary_data"].get<bool>();
      }
      if (p.contains("classification")) {
        VIT_CHECK(p["classification"].is_number_integer() && p["classification"].get<int64_t>() >= 1, kOp,
                  "output '{}': classification must be a positive integer (the top-k)", ro.name);
        ro.classification = p["classification"].get<int64_t>();
      }
    }
    for (const RequestedOutput& seen : outputs) {
      VIT_CHECK(seen.name != ro.name, kOp, "output '{}' is asked for twice", ro.name);
    }
    outputs.push_back(ro);
  }
  return outputs;
}

}  // namespace

InputSpec check_input_spec(const std::string& name, const std::string& datatype, const Shape& dims,
                           const ModelShape& shape) {
  InputSpec s;
  s.name = name;
  s.datatype = datatype;
  s.dims = dims;
  s.shape_text = fmt::format("[{}]", fmt::join(dims, ","));
  VIT_CHECK(name == kInputName || name == kImageName, kOp,
            "unknown input '{}' (the model takes \"{}\": FP32 [B, {}, {}, {}], or \"{}\": BYTES [B] of encoded images)",
            name, kInputName, shape.channels, shape.height, shape.width, kImageName);
  const bool tensor = datatype == "FP32" || datatype == "FP64";
  VIT_CHECK(s.bytes() || (tensor && name == kInputName), kOp, "input '{}': datatype {} (the model takes {})", name,
            datatype, name == kInputName ? "FP32, or BYTES of encoded images" : "BYTES: encoded images");
  for (int64_t v : dims) VIT_CHECK(v >= 0, kOp, "input '{}': negative size {} in shape {}", name, v, s.shape_text);
  if (s.bytes()) {
    s.element = 0;
    VIT_CHECK(dims.size() == 1 || (dims.size() == 2 && dims[1] == 1), kOp,
              "input '{}': shape {} but BYTES images are [B] (or [B, 1]): one encoded image per element", name,
              s.shape_text);
    VIT_CHECK(dims[0] >= 1, kOp, "input '{}': the batch is empty (B = 0)", name);
    s.numel = dims[0];
    return s;
  }
  s.element = datatype == "FP32" ? 4 : 8;
  VIT_CHECK(dims.size() == 4 && dims[1] == shape.channels && dims[2] == shape.height && dims[3] == shape.width, kOp,
            "input '{}': shape {} but the model takes [B, {}, {}, {}]", name, s.shape_text, shape.channels,
            shape.height, shape.width);
  VIT_CHECK(dims[0] >= 1, kOp, "input '{}': the batch is empty (B = 0)", name);
  try {
    s.numel = shape_numel(dims);
  } catch (const Error&) {
    fail(kOp, "input '{}': shape {} overflows", name, s.shape_text);
  }
  return s;
}

Tensor tensor_from_raw(const InputSpec& s, const char* p, uint64_t bytes) {
  // The shape's byte count, which may pass 2^64 (then it is not any binary_data_size).
  const bool beyond = static_cast<uint64_t>(s.numel) > UINT64_MAX / s.element;
  const uint64_t needed = beyond ? 0 : static_cast<uint64_t>(s.numel) * s.element;
  VIT_CHECK(!beyond && bytes == needed, kOp, "input '{}': binary_data_size {} but shape {} of {} needs {} bytes",
            s.name, bytes, s.shape_text, s.datatype, beyond ? std::string("more than 2^64") : std::to_string(needed));
  Tensor x = Tensor::empty(s.dims);  // allocated once the data are known to hold its values
  float* out = x.data<float>();
  if (s.element == 4) {
    std::memcpy(out, p, bytes);
    return x;
  }
  for (int64_t i = 0; i < s.numel; ++i) {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    out[i] = static_cast<float>(v);
  }
  return x;
}

std::vector<std::string> bytes_elements(const InputSpec& s, const char* p, uint64_t bytes) {
  std::vector<std::string> out;
  uint64_t at = 0;
  while (at < bytes) {
    VIT_CHECK(static_cast<int64_t>(out.size()) < s.numel, kOp,
              "input '{}': shape {} has {} elements but the data hold more (at byte {} of {})", s.name, s.shape_text,
              s.numel, at, bytes);
    VIT_CHECK(bytes - at >= 4, kOp, "input '{}': element {} is cut off in its 4-byte length (byte {} of {})", s.name,
              out.size(), at, bytes);
    uint32_t n = 0;
    for (int k = 0; k < 4; ++k) n |= static_cast<uint32_t>(static_cast<uint8_t>(p[at + k])) << (8 * k);
    at += 4;
    VIT_CHECK(n <= bytes - at, kOp, "input '{}': element {} says {} bytes but only {} remain", s.name, out.size(), n,
              bytes - at);
    out.emplace_back(p + at, n);
    at += n;
  }
  VIT_CHECK(static_cast<int64_t>(out.size()) == s.numel, kOp, "input '{}': shape {} needs {} images, the data hold {}",
            s.name, s.shape_text, s.numel, out.size());
  return out;
}

void append_bytes_element(std::string& out, const std::string& element) {
  const auto n = static_cast<uint32_t>(element.size());
  for (int k = 0; k < 4; ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  out += element;
}

std::string base64_decode(const std::string& text, const std::string& what) {
  std::string out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+' || c == '-') v = 62;
    if (c == '/' || c == '_') v = 63;
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    VIT_CHECK(v >= 0, kOp, "{}: not base64 (character {} at offset {})", what,
              c >= 32 && c < 127 ? fmt::format("'{}'", c) : fmt::format("0x{:02x}", static_cast<uint8_t>(c)), i);
    VIT_CHECK(pad == 0, kOp, "{}: not base64 ('=' padding before offset {})", what, i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  VIT_CHECK(bits < 6 && pad <= 2, kOp, "{}: not base64 (its length leaves a lone character)", what);
  return out;
}

InferRequest parse_infer_request(const std::string& body, const std::string& header_length, const ModelShape& shape) {
  const size_t json_bytes = json_length(body, header_length);
  RequestJson parsed = parse_json(body.substr(0, json_bytes), body, header_length);
  const json& j = parsed.json;
  VIT_CHECK(j.is_object(), kOp, "the request must be a JSON object with \"inputs\"");
  InferRequest r;
  if (j.contains("id")) {
    VIT_CHECK(j["id"].is_string(), kOp, "\"id\" must be a string");
    r.id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    const json& p = j["parameters"];
    VIT_CHECK(p.is_object(), kOp, "\"parameters\" must be an object");
    if (p.contains("binary_data_output")) {
      VIT_CHECK(p["binary_data_output"].is_boolean(), kOp, "parameters.binary_data_output must be true or false");
      r.binary_outputs = p["binary_data_output"].get<bool>();
    }
  }
  VIT_CHECK(j.contains("inputs") && j["inputs"].is_array(), kOp, "the request has no \"inputs\" array");
  const json& inputs = j["inputs"];
  VIT_CHECK(inputs.size() == 1, kOp, "the model takes one input, \"{}\"; the request has {}", kInputName,
            inputs.size());
  const json& in = inputs[0];
  const InputSpec spec = parse_input_spec(in, shape);
  const bool binary =
      in.contains("parameters") && in["parameters"].is_object() && in["parameters"].contains("binary_data_size");
  if (binary) {
    read_binary_input(in, spec, body, json_bytes, header_length, r);
  } else {
    read_json_input(in, parsed, spec, body, json_bytes, r);
  }
  if (j.contains("outputs")) r.outputs = parse_outputs(j["outputs"], r.binary_outputs);
  return r;
}

EncodedResponse encode_infer_response(const std::string& model_name, const std::string& version,
                                      const std::optional<std::string>& id, const std::vector<OutputTensor>& outputs) {
  json j;
  j["model_name"] = model_name;
  j["model_version"] = version;
  if (id) j["id"] = *id;
  j["outputs"] = json::array();
  std::string binary;
  for (const OutputTensor& o : outputs) {
    json out = {{"name", o.name}, {"datatype", o.datatype}, {"shape", o.shape}};
    const bool bytes = o.datatype == "BYTES";
    const Tensor values = bytes ? Tensor() : o.values.contiguous();
    if (o.binary) {
      const size_t start = binary.size();
      if (bytes) {
        for (const std::string& s : o.strings) append_bytes_element(binary, s);
      } else {
        binary.append(static_cast<const char*>(values.raw_data()), static_cast<size_t>(values.numel()) * 4);
      }
      out["parameters"] = {{"binary_data_size", binary.size() - start}};
    } else if (bytes) {
      out["data"] = o.strings;
    } else {
      const float* p = values.data<float>();
      out["data"] = std::vector<float>(p, p + values.numel());
    }
    j["outputs"].push_back(std::move(out));
  }
  EncodedResponse r;
  r.body = http::json_text(j);
  if (!binary.empty()) {
    r.header_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace vit::serve::oip
