// HTTP/1.1 request heads, chunked bodies and responses (see http_message.h; RFC 9112).
#include "serve/http/message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

namespace vit::serve::http {
namespace {

// RFC 9110 5.6.2: token characters.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated elements of a header value, trimmed (empty ones dropped).
std::vector<std::string_view> elements(std::string_view value) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start <= value.size();) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string_view e = trim(value.substr(start, comma - start));
    if (!e.empty()) out.push_back(e);
    start = comma + 1;
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// %XX and '+' decoded; false on a broken escape.
bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

Head error(int status, std::string message) {
  Head h;
  h.state = Head::State::Error;
  h.status = status;
  h.error = std::move(message);
  return h;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

namespace {

// The lines of a head (without their CR/LF) and where the head ends, or an error Head; `end` stays
// npos while the head is incomplete (and within its limits).
std::optional<Head> split_head(std::string_view buffer, const Limits& limits, size_t& pos, size_t& end,
                               std::vector<std::string_view>& lines) {
  while (pos < buffer.size() && (buffer[pos] == '\r' || buffer[pos] == '\n')) ++pos;  // empty lines first
  // They count against the head's limit: a client sending only blank lines is refused, not read forever.
  if (pos > limits.max_head_bytes) return error(431, "the request starts with too many empty lines");
  for (size_t at = pos; at < buffer.size();) {
    const size_t nl = buffer.find('\n', at);
    if (nl == std::string_view::npos) break;
    std::string_view line = buffer.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    at = nl + 1;
    if (lines.empty() && line.size() > limits.max_line_bytes) break;  // 414 below
    if (line.empty()) {
      end = at;
      break;
    }
    lines.push_back(line);
    if (lines.size() > limits.max_headers + 1) return error(431, "the request has too many header lines");
  }
  if (end == std::string_view::npos) {
    const size_t first_line = std::min(buffer.find('\n', pos), buffer.size()) - pos;
    if (first_line > limits.max_line_bytes) return error(414, "the request line (the URI) is too long");
    if (buffer.size() - pos > limits.max_head_bytes) return error(431, "the request headers are too large");
    return std::nullopt;
  }
  if (end - pos > limits.max_head_bytes) return error(431, "the request headers are too large");
  return std::nullopt;
}

// The query string's KEY=VALUE pairs, %XX and '+' decoded, into r.query.
std::optional<Head> parse_query(std::string_view query, Request& r) {
  while (!query.empty()) {
    const size_t amp = std::min(query.find('&'), query.size());
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(std::min(amp + 1, query.size()));
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!url_decode(pair.substr(0, eq), key) ||
        !url_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), value))
      return error(400, "malformed query string (a broken %XX escape)");
    r.query.emplace_back(std::move(key), std::move(value));
  }
  return std::nullopt;
}

// The request line: METHOD SP TARGET SP VERSION, single spaces; the target's path and query.
std::optional<Head> parse_request_line(std::string_view line, Request& r, bool& http11) {
  const size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error(400, "malformed request line (METHOD TARGET HTTP/1.1)");
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(r.method)) return error(400, "malformed request method");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return error(400, "malformed HTTP version");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return error(505, "only HTTP/1.0 and HTTP/1.1 are served");
  http11 = version == "HTTP/1.1";
  if (r.target.empty() ||
      std::any_of(r.target.begin(), r.target.end(), [](unsigned char c) { return c <= 32 || c == 127; }))
    return error(400, "malformed request target");
  std::string_view target = r.target;
  for (const std::string_view scheme : {"http://", "https://"}) {  // absolute-form: keep the path
    if (lower(target.substr(0, scheme.size())) == scheme) {
      const size_t slash = target.find('/', scheme.size());
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  if (target.front() != '/') return error(400, "the request target must be a path (/v1/predict)");
  const size_t question = target.find('?');
  r.path = std::string(target.substr(0, question));
  if (question == std::string_view::npos) return std::nullopt;
  return parse_query(target.substr(question + 1), r);
}

// What the header lines say about framing and the connection.
struct Framing {
  int hosts = 0;
  bool has_length = false, has_encoding = false;
  std::string expect;
};

// One header line's framing fields (Host, Content-Length, Transfer-Encoding, Connection, Expect).
std::optional<Head> read_framing_field(const std::string& name, std::string_view value, bool http11, Framing& f,
                                       Head& h) {
  if (name == "host") {
    ++f.hosts;
  } else if (name == "content-length") {
    for (const std::string_view e : elements(value)) {
      if (e.size() > 18 || !std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isdigit(c); }))
        return error(400, fmt::format("Content-Length must be a length in bytes (at most 18 digits), got '{}'", e));
      const int64_t n = std::stoll(std::string(e));
      if (f.has_length && n != h.content_length) return error(400, "conflicting Content-Length values");
      h.content_length = n;
      f.has_length = true;
    }
    if (!f.has_length) return error(400, "an empty Content-Length");
  } else if (name == "transfer-encoding") {
    for (const std::string_view e : elements(value)) {
      if (lower(e) != "chunked")
        return error(501, fmt::format("transfer coding '{}' is not supported (only chunked)", e));
      if (h.chunked) return error(400, "chunked applied twice");
      h.chunked = true;
    }
    f.has_encoding = true;
  } else if (name == "connection") {
    for (const std::string_view e : elements(value)) {
      const std::string token = lower(e);
      if (token == "close") h.request.keep_alive = false;
      if (token == "keep-alive" && !http11) h.request.keep_alive = true;
    }
  } else if (name == "expect") {
    f.expect = lower(value);
  }
  return std::nullopt;
}

// The header lines, then the framing rules they must keep together.
std::optional<Head> parse_fields(const std::vector<std::string_view>& lines, bool http11, Head& h) {
  Framing f;
  h.request.keep_alive = http11;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view field = lines[i];
    if (field.front() == ' ' || field.front() == '\t')
      return error(400, "a header line folded onto the previous one (obs-fold) is not accepted");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon)))
      return error(400, "malformed header line (NAME: VALUE, no space before the colon)");
    const std::string_view value = trim(field.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return (c < 32 && c != '\t') || c == 127; }))
      return error(400, "a header value holds a control character");
    std::string name = lower(field.substr(0, colon));
    if (auto refused = read_framing_field(name, value, http11, f, h)) return refused;
    h.request.headers.emplace_back(std::move(name), std::string(value));
  }
  if (http11 && f.hosts != 1)
    return error(400, f.hosts == 0 ? "an HTTP/1.1 request needs a Host header" : "more than one Host header");
  if (f.has_encoding && !http11) return error(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (f.has_encoding && !h.chunked) return error(400, "Transfer-Encoding without chunked");
  if (f.has_encoding && f.has_length) return error(400, "both Content-Length and Transfer-Encoding");
  if (!f.expect.empty()) {
    if (f.expect != "100-continue") return error(417, fmt::format("expectation '{}' is not supported", f.expect));
    h.expect_continue = http11;
  }
  return std::nullopt;
}

}  // namespace

Head parse_head(std::string_view buffer, const Limits& limits) {
  size_t pos = 0, end = std::string_view::npos;
  std::vector<std::string_view> lines;
  if (auto refused = split_head(buffer, limits, pos, end, lines)) return *refused;
  if (end == std::string_view::npos) return {};  // not all here yet
  Head h;
  bool http11 = false;
  if (auto refused = parse_request_line(lines[0], h.request, http11)) return *refused;
  if (auto refused = parse_fields(lines, http11, h)) return *refused;
  h.bytes = end;
  h.state = Head::State::Done;
  return h;
}

ChunkedDecoder::State ChunkedDecoder::fail(int status, std::string error) {
  status_ = status;
  error_ = std::move(error);
  return State::Error;
}

ChunkedDecoder::State ChunkedDecoder::feed(std::string& in, std::string& body, uint64_t max_body) {
  size_t pos = 0;
  auto line = [&](std::string_view& out) {  // a whole line from pos, or false
    const size_t nl = in.find('\n', pos);
    if (nl == std::string::npos) return false;
    out = std::string_view(in).substr(pos, nl - pos);
    if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
    pos = nl + 1;
    return true;
  };
  State state = State::More;
  while (state == State::More) {
    if (step_ == Step::Size) {
      std::string_view size_line;
      if (!line(size_line)) {
        if (in.size() - pos > 4096) state = fail(400, "malformed chunked body (a chunk-size line over 4 KiB)");
        break;
      }
      if (size_line.size() > 4096) {  // a complete line is held to the same limit (extensions included)
        state = fail(400, "malformed chunked body (a chunk-size line over 4 KiB)");
        break;
      }
      const std::string_view digits = size_line.substr(0, std::min(size_line.find_first_of(" \t;"), size_line.size()));
      if (digits.empty() || digits.size() > 15 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return hex_digit(c) >= 0; })) {
        state = fail(400, "malformed chunked body (a chunk size is not hexadecimal)");
        break;
      }
      remaining_ = std::stoull(std::string(digits), nullptr, 16);
      if (body.size() + remaining_ > max_body) {
        state = fail(413, "the request body is larger than the server's limit (--max-body)");
        break;
      }
      step_ = remaining_ == 0 ? Step::Trailer : Step::Data;
    } else if (step_ == Step::Data) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - pos));
      body.append(in, pos, n);
      pos += n;
      remaining_ -= n;
      if (remaining_ > 0) break;
      step_ = Step::DataEnd;
    } else if (step_ == Step::DataEnd) {
      std::string_view crlf;
      if (!line(crlf)) {
        if (in.size() - pos > 2) state = fail(400, "malformed chunked body (chunk data longer than its size)");
        break;
      }
      if (!crlf.empty()) state = fail(400, "malformed chunked body (chunk data longer than its size)");
      step_ = Step::Size;
    } else {  // trailer lines until an empty one
      std::string_view trailer;
      if (!line(trailer)) {
        if (trailer_bytes_ + in.size() - pos > 16384) state = fail(431, "the chunked body's trailers are too large");
        break;
      }
      trailer_bytes_ += trailer.size() + 2;
      if (trailer_bytes_ > 16384) {  // complete trailer lines count too
        state = fail(431, "the chunked body's trailers are too large");
        break;
      }
      if (trailer.empty()) state = State::Done;
    }
  }
  in.erase(0, pos);
  return state;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string serialize(const Response& response, bool keep_alive, bool head_only) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", response.status,
                                reason_phrase(response.status), response.content_type, response.body.size());
  if (!keep_alive) out += "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) out += fmt::format("{}: {}\r\n", name, value);
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response error_response(int status, const std::string& message) {
  Response r;
  r.status = status;
  r.body = json_text(nlohmann::json{{"error", message}});
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace vit::serve::http
