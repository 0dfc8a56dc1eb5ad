#pragma once

// One request and its response on an HTTP/2 stream, as the server (ServerExchange) or the
// client (ClientExchange) sees it. Both are views over the stream's state, used from the
// connection's executor only. One reader and one writer at a time: read_body and send_data may
// run concurrently (two pumps of a bridge), but not two send_data at once.
//
// Errors: h2::Error codes (stream_reset with reset_code(), refused, connection_closed, goaway,
// header_too_large, invalid_state) or operation_aborted when the awaiting coroutine was
// cancelled (e.g. the losing side of an `||` with a timer).

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "h2/h2.hpp"

namespace sandgate::h2 {

namespace detail {
struct StreamState;
}

using boost::system::error_code;

// Common to both roles: the body received, its trailers, sending a body, resetting.
class Exchange {
 public:
  explicit Exchange(std::shared_ptr<detail::StreamState> s);
  // Unread bytes are acknowledged to the peer and later DATA is dropped; a client exchange
  // whose stream is still open resets it (CANCEL), so a dropped exchange frees its slot.
  ~Exchange();
  Exchange(Exchange&&) noexcept = default;
  Exchange& operator=(Exchange&&) noexcept;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  std::int32_t stream_id() const;

  // Up to buf.size() bytes of the peer's body as they arrive; 0 at its end. Reading is what
  // opens the peer's window again, so a caller that stops reading stalls the sender.
  boost::asio::awaitable<std::pair<error_code, std::size_t>> read_body(std::span<std::uint8_t> buf);
  // Whether the peer's body has ended and all of it was read: the next read_body returns 0
  // and trailers() are complete. A relay checks it after each read so that the last bytes it
  // sends carry END_STREAM, rather than an empty DATA frame following them.
  bool body_ended() const;
  // The peer's trailer fields, once read_body returned 0 (empty when it sent none).
  const Fields& trailers() const;

  // Sends bytes (within the peer's flow-control windows; returns once nghttp2 has taken all
  // of them, so `bytes` may be reused after). end_stream ends the body.
  boost::asio::awaitable<error_code> send_data(std::span<const std::uint8_t> bytes,
                                               bool end_stream);
  // Ends the body with trailer fields (gRPC's grpc-status, ...).
  boost::asio::awaitable<error_code> send_trailers(const Fields& fields);

  // RST_STREAM with `code`; every pending operation of this exchange then fails.
  void reset(ResetCode code = ResetCode::cancel);
  // True once the stream is over (both ends done, reset, or the connection ended).
  bool closed() const;
  // The RST_STREAM code when the stream was reset (by either side). NO_ERROR (0) with a
  // complete response means the server does not want the rest of the request body.
  std::uint32_t reset_code() const;

 protected:
  void drop();
  std::shared_ptr<detail::StreamState> s_;
  bool reset_on_drop_ = false;
};

// The server's side: the request head is complete when the handler gets it.
class ServerExchange : public Exchange {
 public:
  using Exchange::Exchange;
  const RequestHead& request() const;
  // The response head; end_stream for a response without a body.
  boost::asio::awaitable<error_code> send_response_head(int status, const Fields& fields,
                                                        bool end_stream);
  // True once the whole response was handed to nghttp2 (end of stream or trailers).
  bool response_ended() const;
};

// The client's side: opened by ClientConnection::request() with the request head sent.
class ClientExchange : public Exchange {
 public:
  explicit ClientExchange(std::shared_ptr<detail::StreamState> s) : Exchange(std::move(s)) {
    reset_on_drop_ = true;
  }
  // Waits for the final response head (1xx interim responses are skipped).
  boost::asio::awaitable<error_code> read_response_head();
  // ... giving up at `deadline` with asio::error::timed_out (the stream stays open).
  boost::asio::awaitable<error_code> read_response_head(
      std::chrono::steady_clock::time_point deadline);
  const ResponseHead& response() const;  // after read_response_head succeeded
  // The response head's fields, moved out for whoever passes them on (response().fields is
  // empty after).
  Fields take_response_fields();
};

}  // namespace sandgate::h2
