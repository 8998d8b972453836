// `vit serve`'s HTTP pieces without a socket: the request head parser (RFC 9112 framing), the
// chunked decoder fed byte by byte, and the decode budget's leases.
#include <gtest/gtest.h>

#include "serve/decode_budget.h"
#include "serve/http/message.h"

namespace vit::serve {
namespace {

using http::Head;

TEST(HttpMessage, AHeadIsParsedWithItsQueryHeadersAndFraming) {
  const std::string text =
      "\r\nPOST /v1/predict?top_k=3&pool=a%20b+c HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 4\r\n"
      "Connection: close\r\nX-Empty:\r\n\r\nbody";
  const Head h = http::parse_head(text, {});
  ASSERT_EQ(h.state, Head::State::Done) << h.error;
  EXPECT_EQ(h.bytes, text.size() - 4);
  EXPECT_EQ(h.request.method, "POST");
  EXPECT_EQ(h.request.path, "/v1/predict");
  ASSERT_EQ(h.request.query.size(), 2u);
  EXPECT_EQ(h.request.query[1].second, "a b c");
  EXPECT_EQ(h.content_length, 4);
  EXPECT_FALSE(h.request.keep_alive);
  EXPECT_EQ(h.request.header("x-empty"), "");
  EXPECT_EQ(http::parse_head("GET / HTTP/1.1\r\nHost: x\r\n", {}).state, Head::State::Incomplete);
  EXPECT_EQ(http::parse_head("GET / HTTP/1.0\n\n", {}).request.keep_alive, false);  // bare LF, 1.0
}

TEST(HttpMessage, BrokenFramingGetsItsStatus) {
  const std::vector<std::pair<std::string, int>> cases = {
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417},
      {"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"GET /?a=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"GET nothing HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", 400},
  };
  for (const auto& [text, status] : cases) {
    const Head h = http::parse_head(text, {});
    EXPECT_EQ(h.state, Head::State::Error) << text;
    EXPECT_EQ(h.status, status) << text << " -> " << h.error;
  }
  // A chunk-size line (extensions included) and the trailers keep their limits when complete too.
  for (const auto& [body, status] :
       std::vector<std::pair<std::string, int>>{{"5;" + std::string(5000, 'e') + "\r\nhello\r\n0\r\n\r\n", 400},
                                                {"0\r\n" + std::string(17000, 't') + ": x\r\n\r\n", 431}}) {
    http::ChunkedDecoder chunks;
    std::string in = body, out;
    EXPECT_EQ(chunks.feed(in, out, 1 << 20), http::ChunkedDecoder::State::Error) << body.substr(0, 20);
    EXPECT_EQ(chunks.status(), status);
  }
  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 101; ++i) many += "X: 1\r\n";
  EXPECT_EQ(http::parse_head(many + "\r\n", {}).status, 431);
}

// Empty lines before a request are skipped (RFC 9112 2.2) but count against the head's limit: a
// client sending nothing else is refused instead of being read (and parsed) without end.
TEST(HttpMessage, EmptyLinesBeforeARequestCountAgainstTheHeadLimit) {
  const http::Limits limits;
  std::string blank;
  for (size_t i = 0; i < limits.max_head_bytes; i += 2) blank += "\r\n";
  EXPECT_EQ(http::parse_head(blank, limits).state, Head::State::Incomplete);  // at the limit: still waiting
  const Head h = http::parse_head(blank + "\r\n\n", limits);
  EXPECT_EQ(h.state, Head::State::Error);
  EXPECT_EQ(h.status, 431) << h.error;
  EXPECT_EQ(http::parse_head("\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", limits).state, Head::State::Done);
}

TEST(HttpMessage, AChunkedBodyIsDecodedFedByteByByte) {
  const std::string wire = "5;name=v\r\nhello\r\nB\r\n, chunked!!\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  http::ChunkedDecoder decoder;
  std::string in, body;
  http::ChunkedDecoder::State state = http::ChunkedDecoder::State::More;
  size_t fed = 0;
  while (state == http::ChunkedDecoder::State::More && fed < wire.size()) {
    in += wire[fed++];
    state = decoder.feed(in, body, 1000);
  }
  EXPECT_EQ(state, http::ChunkedDecoder::State::Done);
  EXPECT_EQ(body, "hello, chunked!!");
  EXPECT_EQ(wire.substr(fed), "NEXT");  // nothing past the body consumed
  http::ChunkedDecoder small;
  std::string big = "FFFF\r\n", out;
  EXPECT_EQ(small.feed(big, out, 1000), http::ChunkedDecoder::State::Error);
  EXPECT_EQ(small.status(), 413);
  http::ChunkedDecoder bad;
  std::string junk = "zz\r\n";
  EXPECT_EQ(bad.feed(junk, out, 1000), http::ChunkedDecoder::State::Error);
  EXPECT_EQ(bad.status(), 400);
}

TEST(DecodeBudget, LeasesHoldTheirBytesUntilReleased) {
  DecodeBudget budget(100);
  {
    auto a = budget.try_reserve(60);
    ASSERT_TRUE(a.has_value());
    EXPECT_FALSE(budget.try_reserve(50).has_value());
    EXPECT_TRUE(budget.try_reserve(40).has_value());  // released at once
    EXPECT_EQ(budget.used(), 60);
  }
  EXPECT_EQ(budget.used(), 0);
  EXPECT_TRUE(budget.try_reserve(100).has_value());
  EXPECT_FALSE(budget.try_reserve(101).has_value());
  EXPECT_FALSE(budget.try_reserve(-1).has_value());
}

}  // namespace
}  // namespace vit::serve
