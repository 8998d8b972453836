// A client of the Open Inference Protocol written from the protocol's text (not from vit's code),
// for the serve tests: BYTES inputs of encoded images, as base64 strings in JSON or with the
// binary tensor data extension (each element a 4-byte little-endian length and its bytes, after
// the JSON, whose length the Inference-Header-Content-Length header gives), and the logits out.
#pragma once

#include <httplib.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vit::testing {

inline std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8) | static_cast<uint8_t>(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += abc[(v >> (6 * k)) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (i + 1 < bytes.size()) v |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? abc[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Triton's BYTES element: a 4-byte little-endian length, then the bytes.
inline std::string bytes_element(const std::string& bytes) {
  std::string e(4, '\0');
  for (int k = 0; k < 4; ++k) e[static_cast<size_t>(k)] = static_cast<char>((bytes.size() >> (8 * k)) & 0xff);
  return e + bytes;
}

struct OipBody {
  std::string body, header_length;  // header_length: "" for plain JSON
};

// An inference request of encoded images as the BYTES input "image", asking for `output`.
inline OipBody image_request(const std::vector<std::string>& images, bool binary,
                             const std::string& output = "logits") {
  nlohmann::json input = {{"name", "image"}, {"datatype", "BYTES"}, {"shape", {images.size()}}};
  nlohmann::json request = {{"id", "img"}, {"inputs", {input}}, {"outputs", {{{"name", output}}}}};
  std::string data;
  if (binary) {
    for (const std::string& image : images) data += bytes_element(image);
    request["inputs"][0]["parameters"] = {{"binary_data_size", data.size()}};
  } else {
    request["inputs"][0]["data"] = nlohmann::json::array();
    for (const std::string& image : images) request["inputs"][0]["data"].push_back(base64(image));
  }
  const std::string head = request.dump();
  return binary ? OipBody{head + data, std::to_string(head.size())} : OipBody{head, ""};
}

inline httplib::Result post_infer(httplib::Client& client, const std::string& path, const OipBody& b) {
  if (b.header_length.empty()) return client.Post(path, b.body, "application/json");
  return client.Post(path, {{"Inference-Header-Content-Length", b.header_length}}, b.body, "application/octet-stream");
}

// The JSON answer's first output's data (a JSON answer: the request asked for no binary output).
inline std::vector<float> first_output(const httplib::Result& r) {
  if (!r || r->status != 200) return {};
  return nlohmann::json::parse(r->body).at("outputs").at(0).at("data").get<std::vector<float>>();
}

// Whether two logit vectors agree within `tolerance` of the largest magnitude of `want`.
inline bool same_logits(const std::vector<float>& got, const std::vector<float>& want, double tolerance = 1e-6) {
  if (got.size() != want.size() || want.empty()) return false;
  double largest = 0;
  for (float v : want) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::fabs(static_cast<double>(got[k]) - want[k]) > tolerance * largest) return false;
  }
  return true;
}

}  // namespace vit::testing
