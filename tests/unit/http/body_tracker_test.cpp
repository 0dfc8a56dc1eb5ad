// BodyTracker: where a request body ends in a byte stream, however the bytes are split.
#include "http/body_tracker.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sandgate::http {
namespace {

RequestHead head_of(const std::string& text) {
  auto r = parse_request_head(text, {});
  EXPECT_TRUE(r) << text;
  return std::move(*r);
}

// Feeds `stream` in pieces of `step` bytes, as a tunnel would (bytes not taken are presented
// again with the next piece). Returns the offset where the body ended, or npos.
std::size_t body_end(const std::string& head_text, const std::string& stream, std::size_t step) {
  RequestHead head = head_of(head_text);
  BodyTracker body(head);
  std::size_t taken = 0;
  for (std::size_t have = std::min(step, stream.size());;
       have = std::min(have + step, stream.size())) {
    const auto used = body.feed(std::string_view(stream).substr(taken, have - taken));
    if (!used) return std::string::npos - 1;
    taken += *used;
    if (body.done()) return taken;
    if (have == stream.size()) return std::string::npos;
  }
}

TEST(BodyTracker, ContentLengthEndsWhereItSays) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
  const std::string stream = "0123456789GET / HTTP/1.1\r\n";
  for (std::size_t step : {1u, 3u, 10u, 64u}) EXPECT_EQ(body_end(head, stream, step), 10u) << step;
  EXPECT_EQ(body_end(head, "01234", 64), std::string::npos);  // not over yet
}

TEST(BodyTracker, ChunkedEndsAfterTheLastChunkAndTrailers) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string inner = "CONNECT evil:443 HTTP/1.1\r\n\r\n";  // 0x1d bytes
  const std::string body =
      "5;ext=\"x\"\r\nhello\r\n1d\r\n" + inner + "\r\n0\r\nX-Trailer: 1\r\n\r\n";
  const std::string stream = body + "GET / HTTP/1.1\r\n";
  for (std::size_t step : {1u, 2u, 7u, 4096u}) {
    EXPECT_EQ(body_end(head, stream, step), body.size()) << step;
  }
}

TEST(BodyTracker, BadChunkSizeIsMalformed) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(body_end(head, "zz\r\nhello\r\n0\r\n\r\n", 64), std::string::npos - 1);
  EXPECT_EQ(body_end(head, "5\r\nhelloXX0\r\n\r\n", 64), std::string::npos - 1);
}

TEST(BodyTracker, LargeBodyIsCountedNotKept) {
  const std::string head = "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n";
  const std::string stream(1000000, 'x');
  EXPECT_EQ(body_end(head, stream + "tail", 65536), 1000000u);
}

}  // namespace
}  // namespace sandgate::http
