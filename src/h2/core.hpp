#pragma once

// The part of an HTTP/2 connection that does not depend on the transport: the nghttp2 session,
// its callbacks, the state of each stream, and the exchange operations. connection.hpp drives
// it over a stream. Everything runs on one executor; nothing here is thread-safe.

#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "h2/h2.hpp"

namespace sandgate::h2::detail {

namespace asio = boost::asio;
using boost::system::error_code;

// Wakes every coroutine waiting on it; each re-checks its own condition. A timer that never
// expires, cancelled to notify: a notification with nobody waiting is lost, which is fine
// because every waiter checks its condition right before it waits (one thread, no suspension
// in between).
class Signal {
 public:
  explicit Signal(const asio::any_io_executor& ex)
      : timer_(ex, std::chrono::steady_clock::time_point::max()) {}
  // False when the waiting coroutine itself was cancelled (an `||` it is part of was decided).
  asio::awaitable<bool> wait();
  // As wait(), for a signal with one waiter at most, which gives up at `deadline`: what a
  // timer raced against wait() in an `||` would do, without the group's frames and
  // cancellation slots.
  enum class Woke { notified, cancelled, deadline };
  asio::awaitable<Woke> wait_until(std::chrono::steady_clock::time_point deadline);
  void notify() { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
};

// A token bucket: `burst` tokens, `rate` more each second, one taken per event.
class RateLimit {
 public:
  RateLimit(std::uint64_t burst, std::uint64_t rate) : burst_(burst), rate_(rate), tokens_(burst) {}
  bool take();  // false when the bucket is empty

 private:
  std::uint64_t burst_;
  std::uint64_t rate_;
  double tokens_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// The client stream ids a server saw skipped: RFC 9113 section 5.1.1 makes a HEADERS frame on
// one of them (a stream id lower than an earlier one that never opened) a connection error
// PROTOCOL_ERROR. nghttp2 1.52 ignores such a frame, because it cannot tell a skipped id from
// a stream it closed and no longer remembers, where ignoring is right (trailers the client
// sent before our RST_STREAM reached it). Client ids rise one by one in practice, so a gap is
// rare: the last kMaxGaps gaps are kept, a fixed size whatever the client does; an id in an
// older gap is ignored as before.
class SkippedStreamIds {
 public:
  static constexpr std::size_t kMaxGaps = 16;
  // A HEADERS frame of the client's opens `id` (odd); the odd ids between the last one and it
  // were skipped.
  void opened(std::int32_t id);
  // Whether `id` is one that was skipped (so never opened).
  bool skipped(std::int32_t id) const;

 private:
  struct Gap {
    std::int32_t first = 0;
    std::int32_t last = -1;  // both odd, inclusive
  };
  std::array<Gap, kMaxGaps> gaps_{};
  std::size_t next_ = 0;  // where the next gap goes (the oldest is overwritten)
  std::int32_t highest_ = -1;
};

class Core;

// One HTTP/2 stream as both roles see it. Owned by the core while nghttp2 has the stream open,
// and by the exchange that serves it; `core` is cleared when the connection ends, after which
// only what was received stays readable.
struct StreamState {
  StreamState(Core& c, const asio::any_io_executor& ex);
  ~StreamState();
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  Core* core;
  std::int32_t id = -1;

  // The head being received: the request (server) or the response (client).
  RequestHead request;
  ResponseHead response;
  Fields trailers;
  std::size_t header_bytes = 0;  // of the block being received
  bool head_complete = false;
  bool too_large = false;  // a header block went over the limit
  bool discard = false;    // answered by the codec itself: DATA is consumed unread

  // Received DATA not yet read (bounded by the stream window), from inbox_pos on.
  std::vector<std::uint8_t> inbox;
  std::size_t inbox_pos = 0;
  bool remote_ended = false;  // END_STREAM received

  // Sending. The data provider takes from `outbox` (the caller's bytes, during send_data).
  bool head_sent = false;
  bool provider = false;  // a data provider is attached (the head did not end the stream)
  bool deferred = false;  // the provider returned NGHTTP2_ERR_DEFERRED
  std::span<const std::uint8_t> outbox;
  bool end_after_outbox = false;
  bool has_out_trailers = false;
  Fields out_trailers;
  bool local_ended = false;  // END_STREAM (or the trailers) handed to nghttp2

  bool closed = false;
  std::uint32_t close_code = 0;  // RST_STREAM code when closed by a reset
  bool app_reset = false;        // reset() by our side, not counted as abnormal
  error_code failure;            // why the stream failed, when it did

  Signal readable;  // data, end of stream, head, close
  Signal writable;  // outbox drained, close

  // Core::live_'s list (no allocation per stream), while `core` is set.
  StreamState* live_prev = nullptr;
  StreamState* live_next = nullptr;

  std::size_t unread() const { return inbox.size() - inbox_pos; }
};

// The nghttp2 session of one connection, in the server or the client role.
class Core {
 public:
  enum class Role { server, client };
  Core(const asio::any_io_executor& ex, Role role, const Settings& settings);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // The I/O side (connection.hpp).
  // Feeds bytes read from the peer; false once the session failed (a GOAWAY may be queued).
  bool receive(std::span<const std::uint8_t> bytes);
  // Appends what nghttp2 has to send to `out`, up to kWriteBufferBytes; false on a fatal error.
  bool produce(std::vector<std::uint8_t>& out);
  bool wants_read() const;
  bool wants_write() const;
  bool failed() const { return failed_; }
  Signal& write_wanted() { return write_wanted_; }
  // The connection ended (I/O error, EOF, or the session is done): every stream fails with
  // connection_closed, every waiter wakes.
  void end();
  bool ended() const { return ended_; }
  // GOAWAY: graceful (streams in flight finish) or at once with `code`.
  void shutdown();
  void terminate(ResetCode code);

  // Server: called (inside nghttp2's callbacks) for each stream whose request head is
  // complete and valid.
  std::function<void(std::shared_ptr<StreamState>)> on_request;
  // Server: called for each request the codec answered itself (431, 405, 400), with what of
  // its head arrived (fields over the limit are missing), for the owner's audit line.
  std::function<void(const RequestHead&, int status)> on_refused;

  // Client: waits for the peer's first SETTINGS (its stream limit is unknown before) and for a
  // stream slot under both sides' limits, then submits the request.
  asio::awaitable<std::pair<error_code, std::shared_ptr<StreamState>>> submit_request(
      const RequestHead& head, bool end_stream);
  // Submits a response head; the stream's data provider is attached unless it ends here.
  error_code submit_response(StreamState& s, int status, const Fields& fields, bool end_stream);
  void resume(StreamState& s);
  void reset(StreamState& s, ResetCode code);
  // Acknowledges n bytes read from the stream (they return to the peer's windows).
  void consume(StreamState& s, std::size_t n);
  // The exchange is done with the stream: unread bytes are acknowledged to the peer's window.
  void release(StreamState& s);

  // Observed by tests and the owner's metrics.
  std::uint32_t goaway_last_stream_id() const { return goaway_last_id_; }
  bool goaway_received() const { return goaway_received_; }
  // Ended by a limit of our own (the abnormal-end bucket, max_empty_frames).
  bool calmed() const { return calmed_; }
  // Why the session was ended for the peer's doing, a fixed name, "" when it was not:
  // stream_reset_flood (RST_STREAM or abnormal-end rate), control_frame_flood (queued
  // SETTINGS/PING ACKs), continuation_flood, empty_frame_flood, too_many_streams (past
  // SETTINGS_MAX_CONCURRENT_STREAMS once acknowledged), or the name of the GOAWAY code
  // nghttp2 sent for another connection error (protocol_error, ...).
  std::string_view error_cause() const { return error_cause_; }
  // The error code of the GOAWAY that ended it (0 when none).
  std::uint32_t goaway_code() const { return error_code_; }
  nghttp2_session* session() { return session_; }
  // Client: how many streams may be open at once (the peer's SETTINGS_MAX_CONCURRENT_STREAMS,
  // or ours if lower).
  std::uint32_t client_stream_limit() const;

 private:
  friend struct StreamState;
  friend struct Callbacks;

  void on_head_complete(StreamState& s);
  void answer(StreamState& s, int status);
  void count_abnormal_end();
  void count_data_frame(const nghttp2_frame& frame);
  // Ends the session with GOAWAY `code` for the peer's doing; the first cause is kept.
  void fail_connection(std::uint32_t code, std::string_view cause);
  // A GOAWAY went out: one nghttp2 sent for a connection error of its own is named by code.
  void goaway_sent(std::uint32_t code);
  std::size_t open_client_streams() const { return streams_.size(); }

  asio::any_io_executor ex_;
  std::vector<nghttp2_nv> nva_;  // a head being submitted (its capacity kept between heads)
  Role role_;
  Settings settings_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<std::int32_t, std::shared_ptr<StreamState>> streams_;  // open in nghttp2
  StreamState* live_ = nullptr;  // every state that points at this core (StreamState::live_next)
  RateLimit abnormal_ends_;
  Signal write_wanted_;
  Signal slot_free_;  // client: a stream closed, SETTINGS or GOAWAY arrived, or the end
  bool ended_ = false;
  bool failed_ = false;
  bool calmed_ = false;
  bool goaway_received_ = false;
  bool remote_settings_ = false;  // the peer's first SETTINGS arrived
  std::size_t empty_frames_ = 0;  // DATA frames in a row without payload or END_STREAM
  std::string_view error_cause_;
  std::string_view pending_cause_;  // seen by on_invalid_frame_recv, named when GOAWAY goes
  std::uint32_t error_code_ = 0;
  std::uint32_t goaway_last_id_ = 0;
  SkippedStreamIds skipped_ids_;  // server: client stream ids that never opened
};

// The exchange operations, on a stream whose core may be gone (the connection ended): each
// checks s.core before it touches the session.
error_code stream_error(const StreamState& s);
asio::awaitable<std::pair<error_code, std::size_t>> read_body(StreamState& s,
                                                              std::span<std::uint8_t> buf);
asio::awaitable<error_code> send_data(StreamState& s, std::span<const std::uint8_t> bytes,
                                      bool end_stream);
asio::awaitable<error_code> send_trailers(StreamState& s, const Fields& fields);
// time_point::max(): no deadline.
asio::awaitable<error_code> read_response_head(StreamState& s,
                                               std::chrono::steady_clock::time_point deadline);

}  // namespace sandgate::h2::detail
