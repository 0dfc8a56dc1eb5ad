#pragma once

// HTTP/2 connections over an already-connected stream (model and limits: h2.hpp).
//
//   h2::ServerConnection<ssl::stream<tcp::socket>> conn(tls, settings);
//   error_code why = co_await conn.run([](h2::ServerExchange& ex) -> asio::awaitable<void> {...});
//
//   h2::ClientConnection<tcp::socket> up(socket, settings);
//   co_spawn(ex, up.run(), ...);                       // keeps the connection going
//   boost::system::result<h2::ClientExchange> exchange = co_await up.request(head, false);
//
// The connection refers to the stream and must outlive run(); run() returns once the
// connection is over (GOAWAY both ways, EOF, an I/O or protocol error, abort()), and, on the
// server side, only after every handler has returned. Closing the stream (TLS close_notify,
// shutdown) is the owner's, after run().

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/result.hpp>
#include <exception>
#include <memory>
#include <variant>
#include <vector>

#include "h2/core.hpp"
#include "h2/exchange.hpp"

namespace sandgate::h2 {

namespace asio = boost::asio;

namespace detail {

// How long a failed session's GOAWAY may take to go out before the transport is cancelled.
inline constexpr std::chrono::seconds kFailedFlushGrace{1};

// Reads from the peer into nghttp2 until EOF or an error; once nghttp2 wants nothing more
// (or failed) it parks until the write side, which decides the end, is done.
template <class Stream>
asio::awaitable<error_code> read_loop(Stream& stream, Core& core, Signal& parked) {
  constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
  std::array<std::uint8_t, 16 * 1024> buf;
  const asio::mutable_buffer into = asio::buffer(buf);
  while (core.wants_read()) {
    auto [ec, n] = co_await stream.async_read_some(into, use_tuple);
    if (ec) co_return ec;
    core.receive({buf.data(), n});
  }
  if (core.failed()) {
    // The peer broke the protocol or flooded us (often while not reading what we send, as in
    // a PING flood): the write side gets kFailedFlushGrace to send the GOAWAY, then the
    // transport's operations are cancelled, so a peer that never reads cannot hold us.
    asio::steady_timer grace(stream.get_executor(), kFailedFlushGrace);
    auto [ec] = co_await grace.async_wait(use_tuple);
    if (!ec) {
      error_code ignored;
      stream.lowest_layer().cancel(ignored);
      co_return make_error_code(Error::protocol);
    }
    co_return error_code(asio::error::operation_aborted);
  }
  for (;;) {
    const bool woke = co_await parked.wait();
    if (!woke) break;
  }
  co_return error_code{};
}

// Writes what nghttp2 produces, one buffer at a time; done when nghttp2 wants neither to read
// nor to write (after GOAWAY both ways, or after the GOAWAY of a failed session went out).
template <class Stream>
asio::awaitable<error_code> write_loop(Stream& stream, Core& core) {
  constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
  std::vector<std::uint8_t> out;
  out.reserve(kWriteBufferBytes);
  for (;;) {
    out.clear();
    const bool ok = core.produce(out);
    if (!out.empty()) {
      const asio::const_buffer bytes = asio::buffer(out);
      auto [ec, n] = co_await asio::async_write(stream, bytes, use_tuple);
      if (ec) co_return ec;
      continue;
    }
    if (!ok) co_return make_error_code(Error::protocol);
    if (!core.wants_read() && !core.wants_write()) {
      co_return core.failed() ? make_error_code(Error::protocol) : error_code{};
    }
    const bool woke = co_await core.write_wanted().wait();
    if (!woke) co_return error_code(asio::error::operation_aborted);
    // One more turn of the executor before producing: the streams woken together with this
    // loop (the responses of one read from a shared upstream connection, say) add their frames
    // first, and leave in one write (one TLS record, one segment for the peer to read) rather
    // than in one each (bench/README.md: writes per request at 50x10).
    co_await asio::post(stream.get_executor(), asio::use_awaitable);
  }
}

// Runs both loops until the first ends, then ends the core (every stream fails).
template <class Stream>
asio::awaitable<error_code> pump(Stream& stream, Core& core) {
  using namespace asio::experimental::awaitable_operators;
  Signal parked(stream.get_executor());
  std::variant<error_code, error_code> r =
      co_await (read_loop(stream, core, parked) || write_loop(stream, core));
  core.end();
  const error_code ec = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
  if (ec == asio::error::eof) co_return error_code{};
  co_return ec;
}

}  // namespace detail

// HTTP/2 as the server: the client leg of an intercepted connection.
template <class Stream>
class ServerConnection {
 public:
  ServerConnection(Stream& stream, const Settings& settings = {})
      : stream_(stream),
        core_(stream.get_executor(), detail::Core::Role::server, settings),
        handlers_done_(stream.get_executor()) {}
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Serves the connection: handler(ServerExchange&) -> awaitable<void> runs for each request
  // (a copy of it per stream). A handler that returns before its response ended has its
  // stream reset (INTERNAL_ERROR). Returns why the connection ended (empty when it ended
  // cleanly: GOAWAY, or the client's EOF), after the last handler returned.
  template <class Handler>
  asio::awaitable<error_code> run(Handler handler) {
    core_.on_request = [this, &handler](std::shared_ptr<detail::StreamState> s) {
      ++handlers_;
      asio::co_spawn(stream_.get_executor(), serve(handler, std::move(s)),
                     [this](const std::exception_ptr& e) {
                       if (e) ++handler_exceptions_;
                       --handlers_;
                       handlers_done_.notify();
                     });
    };
    const error_code ec = co_await detail::pump(stream_, core_);
    if (on_ended_) on_ended_();
    while (handlers_ > 0) co_await handlers_done_.wait();
    core_.on_request = nullptr;
    co_return ec;
  }

  // Called (on the connection's executor) for each request the codec answered by itself
  // without a handler: 431 (head over max_header_list_bytes), 405 (CONNECT), 400 (host and
  // :authority disagree, or neither is there). For the owner's audit line and metrics.
  void on_refused(std::function<void(const RequestHead&, int status)> f) {
    core_.on_refused = std::move(f);
  }

  // Called once the connection is over and before run() waits for the handlers: for what
  // they wait on that is not this connection's (another connection's streams to reset).
  void on_ended(std::function<void()> f) { on_ended_ = std::move(f); }

  // GOAWAY: no new stream, the open ones finish, then run() returns.
  void shutdown() { core_.shutdown(); }
  // Closes the transport now (a deadline passed): run() returns soon after.
  void abort() {
    error_code ignored;
    stream_.lowest_layer().close(ignored);
  }

  std::size_t handler_exceptions() const { return handler_exceptions_; }
  bool calmed() const { return core_.calmed(); }
  // After run(): why the connection was ended for the client's doing (a flood, a protocol
  // error; detail::Core::error_cause names them), "" when it was not; and the GOAWAY code.
  std::string_view error_cause() const { return core_.error_cause(); }
  std::uint32_t goaway_code() const { return core_.goaway_code(); }

 private:
  template <class Handler>
  static asio::awaitable<void> serve(Handler handler, std::shared_ptr<detail::StreamState> s) {
    // co_spawn starts us inline, inside nghttp2's callback for the request head: the rest of
    // the bytes read with it (a RST_STREAM right behind, as in rapid reset) is not processed
    // yet. Start after it, and not at all for a stream that is over by then: a reset stream
    // costs no handler, no decision and no upstream work (CVE-2023-44487).
    const auto executor = co_await asio::this_coro::executor;
    co_await asio::post(executor, asio::use_awaitable);
    if (s->closed) co_return;
    ServerExchange ex(std::move(s));
    std::exception_ptr failure;
    try {
      co_await handler(ex);
    } catch (...) {
      failure = std::current_exception();  // counted by run()'s completion handler
    }
    if (!ex.response_ended()) ex.reset(ResetCode::internal_error);
    if (failure) std::rethrow_exception(failure);
  }

  Stream& stream_;
  detail::Core core_;
  detail::Signal handlers_done_;
  std::function<void()> on_ended_;
  std::size_t handlers_ = 0;
  std::size_t handler_exceptions_ = 0;
};

// HTTP/2 as the client: the upstream leg. request() may be called from any coroutine on the
// connection's executor while run() is going.
template <class Stream>
class ClientConnection {
 public:
  ClientConnection(Stream& stream, const Settings& settings = {})
      : stream_(stream), core_(stream.get_executor(), detail::Core::Role::client, settings) {}
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Drives the connection until it is over; then every open exchange fails with
  // connection_closed and request() with connection_closed.
  asio::awaitable<error_code> run() { return detail::pump(stream_, core_); }

  // Opens a stream with `head` (fields lowercased, connection-specific ones dropped, host
  // folded into :authority). Waits while the peer's SETTINGS_MAX_CONCURRENT_STREAMS (or ours)
  // is reached. After a GOAWAY from the peer it fails with Error::goaway; the exchanges it
  // still serves (ids up to its last-stream-id) go on, the others fail with Error::refused.
  // A result rather than a pair: GCC 12 keeps a structured binding of a co_await's value
  // out of the coroutine frame, so an exchange bound that way dangles after the next await.
  asio::awaitable<boost::system::result<ClientExchange>> request(const RequestHead& head,
                                                                 bool end_stream) {
    std::pair<error_code, std::shared_ptr<detail::StreamState>> r =
        co_await core_.submit_request(head, end_stream);
    if (r.first) co_return r.first;
    co_return ClientExchange(std::move(r.second));
  }

  void shutdown() { core_.shutdown(); }
  void abort() {
    error_code ignored;
    stream_.lowest_layer().close(ignored);
  }
  bool goaway_received() const { return core_.goaway_received(); }
  bool ended() const { return core_.ended(); }
  // How many streams may be open at once (the peer's limit, or ours if lower).
  std::uint32_t stream_limit() const { return core_.client_stream_limit(); }

 private:
  Stream& stream_;
  detail::Core core_;
};

}  // namespace sandgate::h2
