#include "http/client/plain_exchange.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace sandgate::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

// Runs on the io_context of plain_exchange; takes everything by value.
asio::awaitable<PlainAnswer> exchange(tcp::endpoint endpoint, PlainRequest request,
                                      std::chrono::milliseconds timeout, std::size_t max_body) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(timeout);  // one deadline for connect, write and read together
  try {
    co_await stream.async_connect(endpoint, asio::use_awaitable);
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(request.method), request.target,
                                           11};
    req.set(bhttp::field::host, endpoint.address().to_string());
    req.set(bhttp::field::connection, "close");
    for (const auto& [name, value] : request.fields) req.set(name, value);
    req.body() = std::move(request.body);
    req.prepare_payload();
    co_await bhttp::async_write(stream, req, asio::use_awaitable);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(max_body);
    co_await bhttp::async_read(stream, buffer, parser, asio::use_awaitable);
    co_return PlainAnswer{parser.get().result_int(), parser.get().body(), {}};
  } catch (const boost::system::system_error& e) {
    co_return PlainAnswer{0, {}, e.code().message()};
  }
}

}  // namespace

PlainAnswer plain_exchange(const std::string& host, std::uint16_t port, PlainRequest request,
                           std::chrono::milliseconds timeout, std::size_t max_body) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return {0, {}, "bad address " + host};
  asio::io_context ioc;
  auto result = asio::co_spawn(
      ioc, exchange(tcp::endpoint(address, port), std::move(request), timeout, max_body),
      asio::use_future);
  ioc.run();
  return result.get();
}

}  // namespace sandgate::http
