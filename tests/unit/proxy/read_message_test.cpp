// read_message.hpp against Beast's own composed reads: the same bytes, arriving in the same
// pieces over a real socket, must give the same head, body, errors and leftover bytes.
#include "proxy/read_message.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// What a reader saw of one message (and the bytes left after it).
struct Outcome {
  error_code ec;
  int status = 0;
  std::string fields;
  std::string body;
  bool done = false;
  std::string leftover;
  bool operator==(const Outcome&) const = default;
};

void PrintTo(const Outcome& o, std::ostream* os) {
  *os << "{ec=" << o.ec.message() << " status=" << o.status << " body=\"" << o.body
      << "\" done=" << o.done << " leftover=\"" << o.leftover << "\"}";
}

struct Case {
  std::string name;
  std::vector<std::string> pieces;  // written one at a time, a moment apart
  bool close = true;                // the writer shuts down its side after the last piece
  bool head_request = false;        // a response to HEAD: no body
};

template <bool Ours>
asio::awaitable<Outcome> read_message(tcp::socket& in, bool head_request) {
  Outcome out;
  boost::beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(256);
  parser.body_limit(1 << 20);
  if (head_request) parser.skip(true);
  error_code ec;
  if constexpr (Ours) {
    ec = co_await read_header_into(in, buffer, parser);
  } else {
    std::tie(ec, std::ignore) = co_await bhttp::async_read_header(in, buffer, parser, use_tuple);
  }
  if (!ec) {
    out.status = parser.get().result_int();
    for (const auto& f : parser.get()) {
      out.fields += std::string(f.name_string()) + ": " + std::string(f.value()) + "\n";
    }
    while (!parser.is_done()) {
      char chunk[7];  // small: need_buffer comes up, as with the proxy's full chunks
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      if constexpr (Ours) {
        ec = co_await read_some_into(in, buffer, parser);
      } else {
        std::tie(ec, std::ignore) = co_await bhttp::async_read_some(in, buffer, parser, use_tuple);
      }
      out.body.append(chunk, sizeof chunk - parser.get().body().size);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) break;
    }
  }
  out.ec = ec;
  out.done = parser.is_done();
  out.leftover.assign(static_cast<const char*>(buffer.data().data()), buffer.size());
  co_return out;
}

template <bool Ours>
Outcome run(const Case& c) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket writer(io);
  writer.connect(acceptor.local_endpoint());
  tcp::socket reader = acceptor.accept();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer pause(io);
        for (const std::string& piece : c.pieces) {
          co_await asio::async_write(writer, asio::buffer(piece), use_tuple);
          pause.expires_after(std::chrono::milliseconds(2));
          co_await pause.async_wait(use_tuple);
        }
        if (c.close) writer.shutdown(tcp::socket::shutdown_send);
      },
      asio::detached);
  Outcome out;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        out = co_await read_message<Ours>(reader, c.head_request);
        writer.close();  // a case that waits for more than it gets ends here too
      },
      asio::detached);
  io.run_for(std::chrono::seconds(10));
  return out;
}

class ReadMessage : public ::testing::TestWithParam<Case> {};

TEST_P(ReadMessage, GivesWhatBeastsComposedReadsGive) {
  const Outcome beast = run<false>(GetParam());
  const Outcome ours = run<true>(GetParam());
  EXPECT_EQ(ours, beast);
}

const std::string kHead = "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n";
const std::string kBody = "twenty bytes of body";

INSTANTIATE_TEST_SUITE_P(
    Pieces, ReadMessage,
    ::testing::Values(
        Case{"WholeMessageThenTheNextOne",
             {kHead + kBody + "HTTP/1.1 204 No Content\r\n\r\n"},
             false},
        Case{"HeadAndBodyApart", {kHead, kBody}, false},
        Case{"ByteByByte",
             [] {
               std::vector<std::string> bytes;
               for (const char ch : kHead + kBody.substr(0, 9)) bytes.emplace_back(1, ch);
               bytes.push_back(kBody.substr(9));
               return bytes;
             }(),
             false},
        Case{"NothingBeforeTheClose", {}},
        Case{"CloseInsideTheHead", {"HTTP/1.1 200 OK\r\nContent-Le"}},
        Case{"CloseInsideTheBody", {kHead + "twenty"}},
        Case{"BodyEndsWithTheClose", {"HTTP/1.1 200 OK\r\n\r\nuntil the close", " and more"}},
        Case{"ChunkedInPieces",
             {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
              "lo\r\n6\r\n world\r\n0\r\n\r\nHTTP/1.1"},
             false},
        Case{"HeadOverTheLimit",
             {"HTTP/1.1 200 OK\r\nX-Long: " + std::string(300, 'a') + "\r\n\r\n"}},
        Case{"NotHttp", {"SSH-2.0-OpenSSH_9.2\r\n\r\n"}},
        Case{"ResponseToHeadHasNoBody", {kHead + "HTTP/1.1 200 OK\r\n"}, false, true},
        Case{"InterimThenFinal", {"HTTP/1.1 100 Continue\r\n\r\n" + kHead + kBody}, false}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace sandgate::proxy
