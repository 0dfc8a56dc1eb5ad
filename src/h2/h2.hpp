#pragma once

// HTTP/2 codec over nghttp2, for intercepted streams (both legs of the proxy).
//
// The model
// - One nghttp2 session per connection, driven by two coroutines of the connection (one reads
//   and feeds nghttp2_session_mem_recv, one pulls nghttp2_session_mem_send and writes), all on
//   the executor of the stream it is given: no strand, no lock. Everything here, the exchanges
//   included, must be used from that executor only.
// - ServerConnection<Stream> (connection.hpp) answers a client: for each stream whose request
//   head is complete it spawns handler(ServerExchange&). ClientConnection<Stream> talks to an
//   upstream: request() opens a ClientExchange. Stream is tcp::socket (tests, h2c with prior
//   knowledge) or ssl::stream<tcp::socket> (after ALPN "h2").
// - An exchange is a request and its response on one HTTP/2 stream. Bodies go through the
//   caller's buffer: read_body copies what arrived, send_data waits until nghttp2 has taken the
//   caller's bytes. A bridge (h2<->h1, h2<->h2) reads a head, filters it, opens the other leg,
//   and pumps read_body -> send_data both ways, trailers last.
//
// The limits (Settings)
// - Receiving: DATA is acknowledged (nghttp2_session_consume, automatic WINDOW_UPDATE off) only
//   once read_body has handed it to the caller, so a slow reader stalls its sender. What one
//   stream holds unread is bounded by its window (stream_window; its buffer is at most twice
//   that), what a connection holds by connection_window. nghttp2 refuses a peer that sends
//   past a window (FLOW_CONTROL_ERROR). An exchange that is dropped acknowledges what it did
//   not read, and DATA arriving after that is acknowledged at once.
// - Sending: send_data returns once the bytes are framed, which nghttp2 does only within the
//   peer's windows (the data provider defers, and is resumed by the next send_data); the write
//   side holds at most one write buffer (kWriteBufferBytes).
// - Streams: at most max_concurrent_streams open at once (advertised; nghttp2 refuses more);
//   the client side waits for a free slot under the peer's own limit.
// - Header blocks: a request head over max_header_list_bytes (names plus values plus 32 per
//   field, as RFC 9113 counts; the limit is also advertised) is answered 431; request trailers,
//   a response head or response trailers over it reset the stream (header_too_large). nghttp2
//   ends the connection after max_continuations CONTINUATION frames (CVE-2024-28182).
// - Floods: nghttp2's limits are on and set explicitly: SETTINGS entries per frame, queued
//   SETTINGS/PING ACKs (max_outbound_ack), RST_STREAM rate (CVE-2023-44487, token bucket). On top,
//   streams that end abnormally (reset by the peer, or by nghttp2 for the peer's stream errors,
//   as in "MadeYouReset") drain a token bucket of our own; when it is empty the connection is
//   ended with GOAWAY ENHANCE_YOUR_CALM. So is a connection that gets more than
//   max_empty_frames DATA frames in a row that carry nothing and do not end their stream
//   (CVE-2019-9518). A session nghttp2 gave up on (a flood, a protocol error) gets one second
//   to send its GOAWAY, then the transport is cancelled. Why a connection was ended for the
//   peer's doing is kept as a fixed name (error_cause(), for the owner's audit line).
// - Validation (server): nghttp2's HTTP messaging checks stay on (pseudo-headers, connection-
//   specific fields, te other than trailers, content-length vs DATA). Beyond them a request
//   whose host differs from :authority, or a CONNECT (plain; extended CONNECT is never
//   enabled), never reaches the handler: it is answered 400 / 405 with end of stream
//   (ServerConnection::on_refused reports those, and 431s, to the owner).
// - Sending: every head and trailer section goes through sendable_fields (lowercase names, no
//   connection-specific field); h1_fields.hpp converts to and from Beast's fields.
//
// Not here: deadlines. A peer that stops reading, or never sends, holds its connection until
// the owner's watchdog calls abort(); an idle connection is not closed by the codec either.
//
// Using it with GCC 12: keep every co_await a statement of its own (`auto r = co_await x;`,
// then test r). A co_await inside a condition (`if (!co_await ...)`) or with temporaries in
// its operands resumed frames at a bad index here; and a coroutine lambda must outlive the
// coroutines made from it (no lambda temporary per loop iteration).

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::h2 {

// One header field, name lowercase (HTTP/2 has no other).
struct Field {
  std::string name;
  std::string value;
  bool operator==(const Field&) const = default;
};
using Fields = std::vector<Field>;

// The first value of `name` (lowercase), or empty.
std::string_view find_field(const Fields& fields, std::string_view name);

// Like find_field, with `name` matched without regard to case (fields not yet lowercased).
std::string_view find_field_ascii(const Fields& fields, std::string_view name);

// What of `fields` may go out on an HTTP/2 stream: names lowercased; connection-specific
// fields dropped (connection, keep-alive, proxy-connection, transfer-encoding, upgrade; RFC
// 9113 section 8.2.2), te unless it is "trailers", and host (it becomes :authority). Every
// head and trailer section the codec sends goes through it.
Fields sendable_fields(const Fields& fields);
// Whether a field goes out at all (sendable_fields' rule, names in any case).
bool sendable(std::string_view name, std::string_view value);
// Appends name: value to `out` as sendable_fields would keep it (lowercased), unless it drops
// it. What sendable_fields does field by field, for a caller that builds the fields anew.
void add_sendable(Fields& out, std::string_view name, std::string_view value);

// A request head: the four pseudo-headers and the regular fields in arrival order.
struct RequestHead {
  std::string method;
  std::string scheme;
  std::string authority;
  std::string path;
  Fields fields;
};

// A final response head (1xx interim responses are skipped on the client side).
struct ResponseHead {
  int status = 0;
  Fields fields;
};

// Per-connection limits, the same for both roles.
struct Settings {
  std::uint32_t max_concurrent_streams = 100;
  std::int32_t stream_window = 256 * 1024;        // per-stream receive buffer bound
  std::int32_t connection_window = 4 << 20;       // all streams' unread bytes together
  std::size_t max_header_list_bytes = 64 * 1024;  // like HTTP/1's max_header_bytes
  std::size_t max_continuations = 8;              // CONTINUATION frames after one HEADERS
  std::size_t max_settings_entries = 32;          // per SETTINGS frame
  std::size_t max_outbound_ack = 1000;            // queued SETTINGS/PING ACKs
  // RST_STREAM from the client (nghttp2's own limiter, server only): burst, then per second.
  // Above abnormal_end_burst, since every such reset drains that bucket too: a reset flood
  // is then always ended by ours (GOAWAY ENHANCE_YOUR_CALM, named stream_reset_flood) rather
  // than, depending on timing, by nghttp2's GOAWAY INTERNAL_ERROR, which names no cause.
  std::uint64_t reset_burst = 400;
  std::uint64_t reset_rate = 33;
  // Streams ended abnormally, by either side (our own bucket, both roles): burst, per second.
  std::uint64_t abnormal_end_burst = 200;
  std::uint64_t abnormal_end_rate = 33;
  // DATA frames in a row with no payload and no END_STREAM (our own, both roles; CVE-2019-9518
  // "empty frames flood", as Envoy's max_consecutive_inbound_frames_with_empty_payload).
  std::size_t max_empty_frames = 16;
};

// Errors of this codec, as error_codes of h2::category().
enum class Error {
  stream_reset = 1,   // the peer reset the stream (reset_code() on the exchange says how)
  refused,            // the peer refused the stream or left it out of its GOAWAY: retry-safe
  connection_closed,  // the connection ended before the stream did
  goaway,             // no new stream: the connection is going away
  header_too_large,   // a header block over max_header_list_bytes
  invalid_state,      // an API call out of order (data after end of stream, head twice, ...)
  protocol,           // nghttp2 refused what we asked it to send, or the peer broke HTTP/2
};
const boost::system::error_category& category();
boost::system::error_code make_error_code(Error e);

// HTTP/2 error codes for reset() (RFC 9113 section 7).
enum class ResetCode : std::uint32_t {
  no_error = 0x0,
  protocol_error = 0x1,
  internal_error = 0x2,
  refused_stream = 0x7,
  cancel = 0x8,
  enhance_your_calm = 0xb,
};

// What the write side holds at most before it writes.
inline constexpr std::size_t kWriteBufferBytes = 64 * 1024;

}  // namespace sandgate::h2

template <>
struct boost::system::is_error_code_enum<sandgate::h2::Error> : std::true_type {};
