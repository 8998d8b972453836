// Fuzz target: the Open Inference Protocol's inference request parser (serve/oip/protocol.h), JSON
// and the binary tensor extension. Input: one byte choosing the Inference-Header-Content-Length
// (none, or the byte's value as a length into the body), then the body. The model takes 3 x 4 x 4.
#include <string>

#include "fuzz_target.h"
#include "serve/oip/protocol.h"

VIT_FUZZ_TARGET({
  if (size < 1) return 0;
  const std::string header = data[0] == 0 ? "" : std::to_string(data[0] - 1);
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const vit::serve::oip::InferRequest r = vit::serve::oip::parse_infer_request(body, header, {3, 4, 4});
  // What the parser accepts is a well-formed batch of the model's shape, or encoded images (BYTES).
  if (!r.images.empty()) {
    if (r.input.defined()) __builtin_trap();
    return 0;
  }
  if (r.input.dim() != 4 || r.input.size(1) != 3 || r.input.size(2) != 4 || r.input.size(3) != 4) __builtin_trap();
})
