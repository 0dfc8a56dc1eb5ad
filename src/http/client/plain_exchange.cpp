#include "http/client/plain_exchange.hpp"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
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

constexpr std::size_t kMaxErrorBody = 4096;

bhttp::request<bhttp::string_body> message_of(const tcp::endpoint& endpoint, PlainRequest request) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(request.method), request.target, 11};
  req.set(bhttp::field::host, endpoint.address().to_string());
  req.set(bhttp::field::connection, "close");
  for (const auto& [name, value] : request.fields) req.set(name, value);
  req.body() = std::move(request.body);
  req.prepare_payload();
  return req;
}

// Runs on the io_context of plain_exchange; takes everything by value.
asio::awaitable<PlainAnswer> exchange(tcp::endpoint endpoint, PlainRequest request,
                                      std::chrono::milliseconds timeout, std::size_t max_body) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(timeout);  // one deadline for connect, write and read together
  try {
    co_await stream.async_connect(endpoint, asio::use_awaitable);
    auto req = message_of(endpoint, std::move(request));
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

// `stream` is set while a run reads, and touched only on `ioc`'s thread (stop() posts there).
struct PlainStream::Impl {
  asio::io_context ioc;
  std::atomic<bool> stopped{false};
  beast::tcp_stream* stream = nullptr;
};

namespace {

// Runs on the PlainStream's io_context; `impl` and `on_body` outlive it (run waits for it).
asio::awaitable<PlainAnswer> read_stream(PlainStream::Impl& impl, tcp::endpoint endpoint,
                                         PlainRequest request,
                                         std::chrono::milliseconds connect_timeout,
                                         std::chrono::milliseconds idle,
                                         const std::function<void(std::string_view)>& on_body) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  impl.stream = &stream;
  struct Forget {
    PlainStream::Impl& impl;
    ~Forget() { impl.stream = nullptr; }
  } forget{impl};
  try {
    if (impl.stopped) co_return PlainAnswer{0, {}, "stopped"};
    stream.expires_after(connect_timeout);
    co_await stream.async_connect(endpoint, asio::use_awaitable);
    auto req = message_of(endpoint, std::move(request));
    co_await bhttp::async_write(stream, req, asio::use_awaitable);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);  // it runs for as long as the server writes
    co_await bhttp::async_read_header(stream, buffer, parser, asio::use_awaitable);
    PlainAnswer answer{parser.get().result_int(), {}, {}};
    char piece[4096];
    while (!parser.is_done() && !impl.stopped) {
      parser.get().body().data = piece;
      parser.get().body().size = sizeof piece;
      stream.expires_after(answer.status == 200 ? idle : connect_timeout);
      // read_some: back with what has come (async_read would wait for a full buffer).
      auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser,
                                                     asio::as_tuple(asio::use_awaitable));
      const std::size_t got = sizeof piece - parser.get().body().size;
      if (answer.status == 200 && got > 0) {
        on_body(std::string_view(piece, got));
      } else if (answer.body.size() < kMaxErrorBody) {
        answer.body.append(piece, std::min(got, kMaxErrorBody - answer.body.size()));
      }
      if (ec && ec != bhttp::error::need_buffer) {
        answer.error = ec.message();
        co_return answer;
      }
    }
    if (impl.stopped) answer.error = "stopped";
    co_return answer;
  } catch (const boost::system::system_error& e) {
    co_return PlainAnswer{0, {}, impl.stopped ? "stopped" : e.code().message()};
  }
}

}  // namespace

PlainStream::PlainStream() : impl_(std::make_unique<Impl>()) {}
PlainStream::~PlainStream() = default;

PlainAnswer PlainStream::run(const std::string& host, std::uint16_t port, PlainRequest request,
                             std::chrono::milliseconds connect_timeout,
                             std::chrono::milliseconds idle,
                             const std::function<void(std::string_view)>& on_body) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return {0, {}, "bad address " + host};
  impl_->ioc.restart();
  auto result = asio::co_spawn(impl_->ioc,
                               read_stream(*impl_, tcp::endpoint(address, port), std::move(request),
                                           connect_timeout, idle, on_body),
                               asio::use_future);
  impl_->ioc.run();
  return result.get();
}

void PlainStream::stop() {
  impl_->stopped = true;
  asio::post(impl_->ioc, [impl = impl_.get()] {
    if (impl->stream != nullptr) impl->stream->cancel();
  });
}

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
