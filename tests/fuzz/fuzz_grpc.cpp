// Fuzz target: the gRPC request path of `vit serve` (issue 44) -- a ModelInferRequest message
// parsed by protobuf from the wire bytes, then turned into the shared request
// (serve/grpc/convert.h: raw or typed contents, BYTES elements, outputs and their parameters),
// its images decoded under a pixel limit. The model takes 3 x 4 x 4. Input: the message's bytes.
#include <string>

#include "data/image.h"
#include "fuzz_target.h"
#include "serve/grpc/convert.h"

VIT_FUZZ_TARGET({
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;  // gRPC answers INTERNAL/INVALID: not ours
  const vit::serve::oip::InferRequest r = vit::serve::grpc_door::parse_request(request, {3, 4, 4});
  if (r.images.empty()) {
    if (r.input.dim() != 4 || r.input.size(1) != 3 || r.input.size(2) != 4 || r.input.size(3) != 4) __builtin_trap();
    return 0;
  }
  for (const std::string& bytes : r.images) {
    try {
      vit::data::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz.img", 1 << 16);
    } catch (const vit::Error&) {
    }
  }
})
