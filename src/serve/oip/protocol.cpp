// Open Inference Protocol requests and answers (see protocol.h).
#include "serve/oip/protocol.h"

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

// An input's name, datatype and shape, checked against what the model takes.
struct InputSpec {
  std::string name, datatype, shape_text;
  Shape dims;
  int64_t numel = 0;
  size_t element = 4;  // bytes per value as sent
};

InputSpec parse_input_spec(const json& in, const ModelShape& shape) {
  VIT_CHECK(in.is_object(), kOp, "inputs[0] must be an object {{name, shape, datatype, data}}");
  VIT_CHECK(in.contains("name") && in["name"].is_string(), kOp, "inputs[0] has no \"name\"");
  InputSpec s;
  s.name = in["name"].get<std::string>();
  const std::string& name = s.name;
  VIT_CHECK(name == kInputName, kOp, "unknown input '{}' (the model's input is \"{}\")", name, kInputName);
  VIT_CHECK(in.contains("datatype") && in["datatype"].is_string(), kOp, "input '{}' has no \"datatype\"", name);
  s.datatype = in["datatype"].get<std::string>();
  VIT_CHECK(s.datatype == "FP32" || s.datatype == "FP64", kOp, "input '{}': datatype {} (the model takes FP32)", name,
            s.datatype);
  s.element = s.datatype == "FP32" ? 4 : 8;
  VIT_CHECK(in.contains("shape") && in["shape"].is_array(), kOp, "input '{}' has no \"shape\" array", name);
  s.shape_text = in["shape"].dump();
  for (const json& d : in["shape"]) {
    VIT_CHECK(d.is_number_integer(), kOp, "input '{}': shape entries must be integers, got {}", name, d.dump());
    const int64_t v = d.get<int64_t>();
    VIT_CHECK(v >= 0, kOp, "input '{}': negative size {} in shape {}", name, v, s.shape_text);
    s.dims.push_back(v);
  }
  VIT_CHECK(s.dims.size() == 4 && s.dims[1] == shape.channels && s.dims[2] == shape.height && s.dims[3] == shape.width,
            kOp, "input '{}': shape {} but the model takes [B, {}, {}, {}]", name, s.shape_text, shape.channels,
            shape.height, shape.width);
  VIT_CHECK(s.dims[0] >= 1, kOp, "input '{}': the batch is empty (B = 0)", name);
  try {
    s.numel = shape_numel(s.dims);
  } catch (const Error&) {
    fail(kOp, "input '{}': shape {} overflows", name, s.shape_text);
  }
  return s;
}

// The input's values from the binary data after the JSON (parameters.binary_data_size bytes).
Tensor read_binary_input(const json& in, const InputSpec& s, const std::string& body, size_t json_bytes,
                         const std::string& header_length) {
  const json& size = in["parameters"]["binary_data_size"];
  VIT_CHECK(size.is_number_unsigned(), kOp, "input '{}': parameters.binary_data_size must be a byte count", s.name);
  const uint64_t bytes = size.get<uint64_t>();
  // The shape's byte count, which may pass 2^64 (then it is not any binary_data_size).
  const bool beyond = static_cast<uint64_t>(s.numel) > UINT64_MAX / s.element;
  const uint64_t needed = beyond ? 0 : static_cast<uint64_t>(s.numel) * s.element;
  VIT_CHECK(!beyond && bytes == needed, kOp, "input '{}': binary_data_size {} but shape {} of {} needs {} bytes",
            s.name, bytes, s.shape_text, s.datatype, beyond ? std::string("more than 2^64") : std::to_string(needed));
  VIT_CHECK(!header_length.empty(), kOp,
            "input '{}' is binary but the request has no Inference-Header-Content-Length header", s.name);
  VIT_CHECK(body.size() - json_bytes == bytes, kOp,
            "input '{}': {} bytes of binary data expected after the JSON header, the body has {}", s.name, bytes,
            body.size() - json_bytes);
  VIT_CHECK(!in.contains("data"), kOp, "input '{}' has both binary data and a \"data\" field", s.name);
  const char* p = body.data() + json_bytes;
  Tensor x = Tensor::empty(s.dims);  // allocated once the body is known to hold its values
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

// The input's values from its "data" list (flat, or nested to the shape), read while parsing.
Tensor read_json_input(const json& in, const RequestJson& r, const InputSpec& s, const std::string& body,
                       size_t json_bytes) {
  VIT_CHECK(in.contains("data"), kOp, "input '{}' has no \"data\" (nor binary_data_size)", s.name);
  VIT_CHECK(json_bytes == body.size(), kOp, "{} bytes follow the JSON but no input is binary",
            body.size() - json_bytes);
  VIT_CHECK(r.data_read && r.data_numeric, kOp, "input '{}': \"data\" must hold numbers (a flat or nested list)",
            s.name);
  const auto numel = static_cast<size_t>(s.numel);
  VIT_CHECK(r.data_values == numel, kOp, "input '{}': shape {} needs {} values, \"data\" has {}", s.name, s.shape_text,
            numel, r.data_values);
  Tensor x = Tensor::empty(s.dims);  // allocated once the body is known to hold its values
  std::copy(r.data.begin(), r.data.end(), x.data<float>());
  return x;
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

InferRequest parse_infer_request(const std::string& body, const std::string& header_length, const ModelShape& shape) {
  const size_t json_bytes = json_length(body, header_length);
  const RequestJson parsed = parse_json(body.substr(0, json_bytes), body, header_length);
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
  r.input = binary ? read_binary_input(in, spec, body, json_bytes, header_length)
                   : read_json_input(in, parsed, spec, body, json_bytes);
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
        for (const std::string& s : o.strings) {
          const auto n = static_cast<uint32_t>(s.size());
          for (int k = 0; k < 4; ++k) binary += static_cast<char>((n >> (8 * k)) & 0xff);
          binary += s;
        }
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
