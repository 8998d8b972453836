// HTTP/1.1 messages for `vit serve`'s own HTTP layer (serve/http/event_loop.h): the request head
// parsed by RFC 9112's framing rules, the chunked body decoder, and responses written out.
// Framing (RFC 9112 sections 2-7), all refused before any body is read:
//   - request line METHOD SP TARGET SP HTTP/1.x (414 when longer than max_line_bytes, 505 for
//     another HTTP version); header lines NAME ":" OWS VALUE OWS; a line folded onto the
//     previous one (obs-fold), whitespace before the colon, control characters: 400;
//   - the whole head over max_head_bytes, or more than max_headers lines: 431;
//   - HTTP/1.1 without exactly one Host: 400;
//   - Content-Length: digits only (no sign), at most 18 of them, every copy the same: else 400;
//     over max_body_bytes: 413 at once;
//   - Transfer-Encoding: only "chunked" (other codings 501); with Content-Length, or in an
//     HTTP/1.0 request: 400;
//   - Expect: 100-continue (a 100 is sent only when the body is within the limit); any other
//     expectation 417.
// Lines may end in CRLF or a bare LF (RFC 9112 2.2); empty lines before a request are skipped.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vit::serve::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method, target, path;  // path: the target up to '?'
  Fields query;                      // decoded (%XX, '+'), in order
  Fields headers;                    // names lowercased, in order
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive
  // The first value of a header (name lowercase), or "" when absent.
  std::string header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Fields headers;  // extra headers (Allow, Retry-After)
};

struct Limits {
  size_t max_line_bytes = 8 << 10;   // the request line (414 beyond)
  size_t max_head_bytes = 16 << 10;  // request line and headers (431 beyond)
  size_t max_headers = 100;          // header lines (431 beyond)
  uint64_t max_body_bytes = 64 << 20;
};

// What parse_head found at the start of a buffer.
struct Head {
  enum class State { Incomplete, Done, Error } state = State::Incomplete;
  size_t bytes = 0;            // Done: the head's length, empty lines before it included
  int status = 0;              // Error: the status to answer (the connection is closed after)
  std::string error;           // Error: why, for the answer
  Request request;             // Done: method, target, path, query, headers, keep_alive
  int64_t content_length = 0;  // Done: the body's length when not chunked
  bool chunked = false;
  bool expect_continue = false;
};
Head parse_head(std::string_view buffer, const Limits& limits);

// A chunked body (RFC 9112 7.1), fed as bytes arrive: chunk sizes in hex with optional
// extensions, each chunk's data and CRLF, a last chunk of size 0, trailer lines (ignored).
class ChunkedDecoder {
 public:
  enum class State { More, Done, Error };
  // Consumes from `in` (whatever it can), appends data to body. Error: status()/error() say why
  // (400 malformed, 413 more than max_body bytes).
  State feed(std::string& in, std::string& body, uint64_t max_body);
  int status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  State fail(int status, std::string error);
  enum class Step { Size, Data, DataEnd, Trailer } step_ = Step::Size;
  uint64_t remaining_ = 0, trailer_bytes_ = 0;
  int status_ = 0;
  std::string error_;
};

const char* reason_phrase(int status);
// The status line, Content-Type, Content-Length, Connection: close when !keep_alive, the extra
// headers, then the body (left out for a HEAD request: Content-Length still the body's).
std::string serialize(const Response& response, bool keep_alive, bool head_only);
// An error answer: {"error": message} as JSON.
Response error_response(int status, const std::string& message);
// The text of every JSON answer: compact, with bytes that are not UTF-8 (an error message may quote
// the request) replaced rather than a failure to answer.
std::string json_text(const nlohmann::json& value);

}  // namespace vit::serve::http
