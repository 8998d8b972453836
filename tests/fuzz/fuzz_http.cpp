// Fuzz target: `vit serve`'s HTTP/1.1 request reader (serve/http/message.h): the head's framing
// (request line, headers, Content-Length, Transfer-Encoding, Expect) under small limits, then, for a
// chunked request, the chunked body decoder fed the rest in pieces of the first byte's size.
#include <string>
#include <string_view>

#include "fuzz_target.h"
#include "serve/http/message.h"

VIT_FUZZ_TARGET({
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 17;
  const std::string_view buffer(reinterpret_cast<const char*>(data) + 1, size - 1);
  vit::serve::http::Limits limits;
  limits.max_line_bytes = 256;
  limits.max_head_bytes = 1024;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  const vit::serve::http::Head head = vit::serve::http::parse_head(buffer, limits);
  using State = vit::serve::http::Head::State;
  if (head.state == State::Error && (head.status < 400 || head.status > 599)) __builtin_trap();
  if (head.state != State::Done) return 0;
  if (head.bytes > buffer.size()) __builtin_trap();
  if (!head.chunked) {  // (the body's limit is the event loop's: 413 before reading it)
    if (head.content_length < 0) __builtin_trap();
    return 0;
  }
  vit::serve::http::ChunkedDecoder decoder;
  std::string body;
  std::string pending;
  std::string_view rest = buffer.substr(head.bytes);
  while (!rest.empty()) {
    pending.append(rest.substr(0, piece));
    rest.remove_prefix(std::min(piece, rest.size()));
    const auto state = decoder.feed(pending, body, limits.max_body_bytes);
    if (body.size() > limits.max_body_bytes) __builtin_trap();
    if (state != vit::serve::http::ChunkedDecoder::State::More) break;
  }
})
