// Fuzz target: the image-bytes path of the Open Inference Protocol (issue 44) -- a BYTES input's
// elements parsed, base64-decoded, each image decoded under a pixel limit and preprocessed as a
// served model does (shorter side 36, crop 32, RGB). Input: one byte choosing the form, then:
//   0: a whole request body (JSON; binary after a JSON of the byte 1's value in length),
//   1: the bytes of one or more images, length-prefixed (Triton's BYTES), wrapped in a binary request,
//   2: the bytes of one image, wrapped as a base64 string in a JSON request.
#include <string>
#include <vector>

#include "data/image.h"
#include "fuzz_target.h"
#include "infer/preprocess.h"
#include "serve/oip/protocol.h"

namespace {

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : bytes) {
    acc = (acc << 8) | static_cast<uint8_t>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += abc[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += abc[(acc << (6 - bits)) & 63];
  return out;
}

void exercise(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::string body, header;
  const uint8_t form = data[0] % 3;
  if (form == 0) {
    body = rest;
    header = data[1] == 0 ? "" : std::to_string(data[1] - 1);
  } else if (form == 1) {
    const int count = 1 + data[1] % 3;
    const std::string head = R"({"inputs":[{"name":"image","datatype":"BYTES","shape":[)" + std::to_string(count) +
                             R"(],"parameters":{"binary_data_size":)" + std::to_string(rest.size()) + "}}]}";
    body = head + rest;
    header = std::to_string(head.size());
  } else {
    body = R"({"inputs":[{"name":"image","datatype":"BYTES","shape":[1],"data":[")" + base64(rest) + R"("]}]})";
  }
  vit::serve::oip::InferRequest r = vit::serve::oip::parse_infer_request(body, header, {3, 32, 32});
  vit::infer::Preprocess p;
  p.resize = 36;
  p.crop = 32;
  std::vector<float> out(3 * 32 * 32);
  for (const std::string& bytes : r.images) {
    try {
      const vit::data::Image image =
          vit::data::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz.img", 1 << 16);
      vit::infer::preprocess_into(image, p, 3, out.data());
    } catch (const vit::Error&) {  // one bad image of several: the next is still tried
    }
  }
}

}  // namespace

VIT_FUZZ_TARGET({ exercise(data, size); })
