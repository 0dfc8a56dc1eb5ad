// HTTP/2 on the client leg of an intercepted connection (src/h2 drives nghttp2). Each stream
// is one request: it goes through the same request filters as an HTTP/1.1 request, then to
// the intercepted name over HTTP/2 (h2 to h2: one multiplexed upstream connection, trailers
// and streaming both ways, as gRPC needs) or, when the destination speaks only HTTP/1.1, over
// HTTP/1.1 connections of its own (one per stream in flight, at most kMaxH1PerClient, kept
// alive between them).
// Bodies are pumped through fixed buffers under each side's flow control; nothing is held
// whole.
#include <linux/sockios.h>
#include <openssl/ssl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "h2/connection.hpp"
#include "h2/h1_fields.hpp"
#include "http/request_head.hpp"
#include "proxy/interception.hpp"
#include "proxy/interception/request_body.hpp"
#include "proxy/read_message.hpp"
#include "proxy/request_filter.hpp"
#include "proxy/session.hpp"
#include "proxy/tls_streams.hpp"
#include "proxy/upstreams/pool.hpp"
#include "proxy/upstreams/shared_h2.hpp"
#include "secrets/redactor.hpp"
#include "secrets/response_scrubber.hpp"
#include "secrets/tripwire.hpp"

namespace sandgate::proxy {

namespace {

namespace bhttp = boost::beast::http;
using ClientStream = asio::ssl::stream<PrefixedSocket>;
using UpstreamStream = asio::ssl::stream<tcp::socket&>;
constexpr std::size_t kChunk = 16 * 1024;

// A kChunk buffer a stream pumps a body through, taken from the ones this worker thread's
// streams gave back (at most kSpare wait), so that a stream costs no allocation and no zeroing
// of one (they were a tenth of the CPU of a small multiplexed request, bench/README.md).
class ChunkBuffer {
 public:
  static constexpr std::size_t kSpare = 64;
  ChunkBuffer() {
    auto& spare = spares();
    if (spare.empty()) {
      bytes_.resize(kChunk);
    } else {
      bytes_ = std::move(spare.back());
      spare.pop_back();
    }
  }
  ~ChunkBuffer() {
    auto& spare = spares();
    if (bytes_.size() == kChunk && bytes_.capacity() == kChunk && spare.size() < kSpare) {
      spare.push_back(std::move(bytes_));
    }
  }
  ChunkBuffer(const ChunkBuffer&) = delete;
  ChunkBuffer& operator=(const ChunkBuffer&) = delete;
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  static std::vector<std::vector<std::uint8_t>>& spares() {
    thread_local std::vector<std::vector<std::uint8_t>> spare;
    return spare;
  }
  std::vector<std::uint8_t> bytes_;
};

// A reply sandgate answers itself, on one stream.
class StreamResponder final : public Responder {
 public:
  explicit StreamResponder(h2::ServerExchange& ex) : ex_(ex) {}
  asio::awaitable<void> send(const Reply& reply) override {
    h2::Fields fields;
    for (const auto& [name, value] : reply.fields) fields.push_back({name, value});
    fields.push_back({"content-length", std::to_string(reply.body.size())});
    const h2::Fields sendable = h2::sendable_fields(fields);
    const bool empty = reply.body.empty();
    const auto ec =
        co_await ex_.send_response_head(static_cast<int>(reply.status), sendable, empty);
    if (ec || empty) co_return;
    const auto* data = reinterpret_cast<const std::uint8_t*>(reply.body.data());
    co_await ex_.send_data({data, reply.body.size()}, true);
  }
  void name_request(Session& s) const override {
    s.request_method = ex_.request().method;
    s.request_path = ex_.request().path;
  }

 private:
  h2::ServerExchange& ex_;
};

// An upstream connection of an HTTP/2 client connection, known to the session while it
// lives, so that the session's deadline and abort() reach it (Session::more_upstreams).
struct Tracked {
  Tracked(Session& s, std::unique_ptr<UpstreamConn> c) : session(s), conn(std::move(c)) {
    session.more_upstreams.push_back(&conn->socket);
  }
  ~Tracked() {
    if (conn) std::erase(session.more_upstreams, &conn->socket);
  }
  // The connection, no longer the session's (for the worker's pool).
  std::unique_ptr<UpstreamConn> release() {
    std::erase(session.more_upstreams, &conn->socket);
    return std::move(conn);
  }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;
  Session& session;
  std::unique_ptr<UpstreamConn> conn;
};
using TrackedPtr = std::unique_ptr<Tracked>;

// How many HTTP/1.1 connections one HTTP/2 client connection may hold to its destination at
// once (as browsers hold 6 per origin); further streams wait for one of them (THREATS 31).
constexpr std::size_t kMaxH1PerClient = 6;
// A waiting stream looks again this often even when no connection was given back, so that
// one the client reset does not wait on.
constexpr auto kH1WaitPoll = std::chrono::milliseconds(200);

// The upstream side of one intercepted HTTP/2 connection. Touched only on the session's
// worker.
struct Upstreams {
  explicit Upstreams(Session& session)
      : s(session),
        h1_freed(session.client.get_executor(), std::chrono::steady_clock::time_point::max()) {}
  ~Upstreams() { settle(); }
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;

  // The HTTP/1.1 connections held (in use or idle) beyond the first count as connections of
  // the sandbox and against max_connections (so against the descriptor budget too); gives
  // back what is counted beyond what is held.
  void settle() {
    while (h1_counted > 0 && h1_busy + idle.size() <= h1_counted) {
      --h1_counted;
      s.deps.shared->connections.bound.fetch_sub(1);
      if (s.sandbox_connections != nullptr) s.sandbox_connections->fetch_sub(1);
    }
  }
  // Counts one more HTTP/1.1 connection beyond the first; false over the caps.
  bool count_one_more() {
    auto& connections = s.deps.shared->connections;
    if (connections.bound.fetch_add(1) >= s.limits().max_connections) {
      connections.bound.fetch_sub(1);
      return false;
    }
    if (s.sandbox_connections != nullptr &&
        s.sandbox_connections->fetch_add(1) >= s.limits().max_connections_per_sandbox) {
      s.sandbox_connections->fetch_sub(1);
      connections.bound.fetch_sub(1);
      return false;
    }
    ++h1_counted;
    return true;
  }

  Session& s;
  // The destination speaks HTTP/2: the streams go over the sandbox's connections to it
  // (shared_h2.hpp); those in flight there are listed, to be reset when the client's
  // connection ends (what its deadline or abort cannot reach otherwise).
  std::unique_ptr<SharedH2Registry::Share> h2;
  std::vector<h2::ClientExchange*> h2_streams;
  // Else HTTP/1.1 connections not in use right now (kept alive by their destination).
  std::vector<TrackedPtr> idle;
  std::size_t h1_busy = 0;     // streams using (or dialling) an HTTP/1.1 connection
  std::size_t h1_counted = 0;  // how many of those held are counted (settle)
  // Streams waiting for their turn wait on this; cancel() wakes them all.
  asio::steady_timer h1_freed;
};

// Waits until this stream may use an HTTP/1.1 connection: an idle one (the caller's to take),
// or room for one more (at most kMaxH1PerClient, and within the sandbox's connection caps
// beyond the first). On true, ups.h1_busy counts the stream (H1Turn gives it back); false
// when the stream or the session ended meanwhile.
asio::awaitable<bool> wait_h1_turn(Session& s, Upstreams& ups, h2::ServerExchange& ex) {
  using namespace asio::experimental::awaitable_operators;
  for (;;) {
    if (ex.closed() || s.aborted) co_return false;
    const std::size_t held = ups.h1_busy + ups.idle.size();
    if (!ups.idle.empty() || held == 0 || (held < kMaxH1PerClient && ups.count_one_more())) {
      ++ups.h1_busy;
      co_return true;
    }
    asio::steady_timer poll(s.client.get_executor(), kH1WaitPoll);
    co_await (ups.h1_freed.async_wait(use_tuple) || poll.async_wait(use_tuple));
  }
}

// A stream's turn on an HTTP/1.1 connection, given back when the stream is done with it (its
// connection back among the idle ones, or dropped); the waiting streams are woken.
struct H1Turn {
  Upstreams& ups;
  ~H1Turn() {
    --ups.h1_busy;
    ups.settle();
    ups.h1_freed.cancel();
  }
};

// Dials the intercepted name and makes sandgate's TLS to it. On failure the reply has been
// sent on `to` (and the line written), or nothing at all without `to`; null then.
asio::awaitable<TrackedPtr> connect_upstream(Session& s, const policy::Host& host,
                                             std::uint16_t port, bool offer_h2, Responder* to) {
  const std::string shown = host.display();
  Dialed dialed = co_await s.dial(host, port);
  if (dialed.error != Errc::ok && to == nullptr) co_return nullptr;
  if (dialed.error == Errc::network_denied) {
    co_await s.deny(policy::EntryMode::http, shown, port, dialed.denial, &dialed.denied_host, {},
                    to);
    co_return nullptr;
  }
  if (dialed.error != Errc::ok) {
    co_await s.fail(policy::EntryMode::http, dialed.error, shown, port, {},
                    telemetry::Phase::connect, to);
    co_return nullptr;
  }
  auto up = std::make_unique<Tracked>(
      s, std::make_unique<UpstreamConn>(std::move(dialed.socket), upstream_authority(s, host, port),
                                        dialed.address));
  std::string why;
  const Errc e = co_await upstream_tls(s, *up->conn, host, why, offer_h2);
  s.watchdog->arm(s.limits().idle_timeout);
  if (e != Errc::ok) {
    if (to != nullptr) {
      co_await s.fail(policy::EntryMode::http, e, shown, port, why, telemetry::Phase::connect, to);
    }
    co_return nullptr;
  }
  co_return up;
}

// What one exchange moved, for its line.
struct Moved {
  std::uint64_t up = 0;
  std::uint64_t down = 0;
  int status = 0;
  bool complete = false;
  bool reported = false;  // the failure has its own line already (and reply, when one fits)
  // A response from a host a credential is bound to: its fields (and trailers) go through
  // `redact`, its body through `scrub`, made from `forms` once the head says its codings.
  secrets::Redactor* redact = nullptr;
  const std::vector<std::string>* forms = nullptr;
  std::unique_ptr<secrets::ResponseScrubber> scrub;
  // Its coding could not be decoded: from the head (the client is answered 502), or in the
  // body (the stream is reset).
  enum class Undecodable { no, head, body } undecodable = Undecodable::no;
  // What the request body goes through (RequestBody: the placeholder tripwire, chunks signed
  // again), when anything reads it; and whether it stopped the body: the tripwire refused it
  // (`tripped`) or its chunks could not be signed again (`unsignable`). The upstream stream was
  // then reset before the bytes in question.
  RequestBody* body = nullptr;
  bool tripped = false;
  bool unsignable = false;
  // h2 to h2: when a byte of the request last went upstream (its head, then each body chunk).
  // The destination's silence, which head_deadline bounds, is counted from there.
  std::chrono::steady_clock::time_point last_sent{};
  // h2 to h2: why the destination's stream failed before its response head (timed_out: it was
  // silent; h2::Error::refused: it refused the stream, also by RST_STREAM REFUSED_STREAM); the
  // client is told once both pumps are done.
  h2::error_code head_failure;
};

// What of the client's request body may go on now: all of `chunk` when nothing reads it, else
// what moved.body let go (it may hold bytes back). Sets moved.tripped or moved.unsignable when
// the body must stop.
std::span<const std::uint8_t> pass_body(Moved& moved, std::span<const std::uint8_t> chunk,
                                        bool last) {
  if (moved.body == nullptr) return chunk;
  const std::string_view go =
      moved.body->pass({reinterpret_cast<const char*>(chunk.data()), chunk.size()}, last);
  moved.tripped = moved.tripped || moved.body->refused();
  moved.unsignable = moved.unsignable || moved.body->broken();
  return {reinterpret_cast<const std::uint8_t*>(go.data()), go.size()};
}

// Whether the client's request trailers may leave: the body's tripwire reads them too (THREATS
// 36). A refusal stops the request as one in its body does (moved.tripped).
bool trailers_pass(Moved& moved, const h2::Fields& trailers) {
  secrets::BodyTripwire* trip = moved.body != nullptr ? moved.body->tripwire() : nullptr;
  if (trip == nullptr || trailers.empty()) return true;
  std::vector<std::string_view> texts;
  for (const auto& f : trailers) {
    texts.push_back(f.name);
    texts.push_back(f.value);
  }
  if (trip->pass_trailers(texts)) return true;
  moved.tripped = true;
  return false;
}

// The response's fields with every occurrence of a secret replaced (same length).
h2::Fields redacted(h2::Fields fields, secrets::Redactor* redact) {
  if (redact != nullptr) {
    for (auto& f : fields) f.value = redact->redact(f.value);
  }
  return fields;
}

// The head of a response whose body is scanned (moved.forms; its fields already redacted):
// its content codings decide how the body goes. A body to be decoded goes without
// content-encoding and content-length, its etag weakened. False when a coding cannot be
// decoded (moved.undecodable): nothing of the response may go out then.
bool scrub_head(Moved& moved, h2::Fields& fields, bool has_body) {
  if (moved.forms == nullptr || !has_body) return true;
  std::vector<std::string_view> encodings;
  for (const h2::Field& f : fields) {
    if (f.name == "content-encoding") encodings.push_back(f.value);
  }
  std::optional<std::vector<secrets::Coding>> codings = secrets::parse_content_codings(encodings);
  if (!codings) {
    moved.undecodable = Moved::Undecodable::head;
    return false;
  }
  const bool decoded = !codings->empty();
  moved.scrub = std::make_unique<secrets::ResponseScrubber>(*moved.forms, std::move(*codings));
  if (decoded) {
    std::erase_if(fields, [](const h2::Field& f) {
      return f.name == "content-encoding" || f.name == "content-length";
    });
    for (h2::Field& f : fields) {
      if (f.name == "etag") f.value = secrets::weakened_etag(f.value);
    }
  }
  return true;
}

// Sends body bytes (through the scrubber when there is one: decoded, redacted); `last`: the
// body ends here and what the scrubber held back goes too. Returns the send's error, or one
// when the body could not be decoded (moved.undecodable).
asio::awaitable<h2::error_code> send_body(h2::ServerExchange& ex, Moved& moved,
                                          std::span<const std::uint8_t> bytes, bool last,
                                          bool end_stream) {
  if (!moved.scrub) {
    if (bytes.empty() && !end_stream) co_return h2::error_code{};
    const h2::error_code ec = co_await ex.send_data(bytes, end_stream);
    co_return ec;
  }
  moved.scrub->push({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, last);
  // The piece that finishes the scrubber (what the redactor held back) is the body's last: it
  // carries END_STREAM, empty only when nothing was held back.
  for (;;) {
    const std::string_view piece = moved.scrub->pull();
    const bool end = end_stream && moved.scrub->finished();
    if (piece.empty() && !end) break;
    const std::span<const std::uint8_t> view(reinterpret_cast<const std::uint8_t*>(piece.data()),
                                             piece.size());
    if (const h2::error_code ec = co_await ex.send_data(view, end)) co_return ec;
    if (end) co_return h2::error_code{};
  }
  if (moved.scrub->failed()) {
    moved.undecodable = Moved::Undecodable::body;
    co_return boost::system::errc::make_error_code(boost::system::errc::illegal_byte_sequence);
  }
  if (!end_stream) co_return h2::error_code{};
  const h2::error_code ec = co_await ex.send_data({}, true);
  co_return ec;
}

// The session's deadline while a destination owes an HTTP/2 client's stream its response head:
// past the stream's own, so that a silent destination ends its stream, not the connection.
std::chrono::milliseconds owed_head_deadline(const Session& s) {
  return s.limits().idle_timeout + s.limits().header_timeout;
}

// The client's request body (its first `first` bytes already read) to an upstream stream,
// then its trailers. The bytes of the read that ends the body carry END_STREAM (or the
// trailers follow them), so no empty DATA frame ends the upstream stream unless the client's
// end came on its own.
asio::awaitable<void> pump_request(Session& s, h2::ServerExchange& ex, h2::ClientExchange& up,
                                   std::vector<std::uint8_t>& buf, std::size_t first,
                                   Moved& moved) {
  for (std::size_t n = first;;) {
    const bool last = n == 0 || ex.body_ended();
    const std::span<const std::uint8_t> go = pass_body(moved, {buf.data(), n}, last);
    if (moved.tripped || moved.unsignable || (last && !trailers_pass(moved, ex.trailers()))) {
      up.reset();
      co_return;
    }
    const bool end = last && ex.trailers().empty();
    if (!go.empty() || end) {
      moved.up += go.size();
      s.watchdog->arm(moved.status == 0 ? owed_head_deadline(s) : s.limits().idle_timeout);
      if (co_await up.send_data(go, end)) co_return;
      moved.last_sent = std::chrono::steady_clock::now();
    }
    if (last) break;
    auto [ec, got] = co_await ex.read_body(buf);
    if (ec) {
      up.reset();
      co_return;
    }
    n = got;
  }
  if (ex.trailers().empty()) co_return;
  const h2::error_code ec = co_await up.send_trailers(ex.trailers());
  if (!ec) moved.last_sent = std::chrono::steady_clock::now();
}

// What the client still sends of a request's body is read and dropped (up to kLingerBytes,
// for at most kLingerTime) before sandgate's own answer goes out (a refusal, a 5xx), as over
// HTTP/1.1 (linger_close): a response that ends the stream while the client is still sending
// makes nghttp2 follow it with RST_STREAM NO_ERROR, which curl (7.88) reports as an error
// without showing the response.
asio::awaitable<void> drain_body(h2::ServerExchange& ex, std::vector<std::uint8_t>& buf) {
  using namespace asio::experimental::awaitable_operators;
  const auto drain = [](h2::ServerExchange& from,
                        std::vector<std::uint8_t>& into) -> asio::awaitable<void> {
    for (std::size_t total = 0; total < kLingerBytes;) {
      auto [ec, n] = co_await from.read_body(into);
      if (ec || n == 0) co_return;
      total += n;
    }
  };
  asio::steady_timer timer(co_await asio::this_coro::executor, kLingerTime);
  co_await (drain(ex, buf) || timer.async_wait(use_tuple));
}

// Completes once the destination has owed its response head for idle_timeout_ms since the
// request's last byte went to it (a long upload is progress, not silence), unless cancelled.
asio::awaitable<void> head_deadline(Session& s, const Moved& moved) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_at(moved.last_sent + s.limits().idle_timeout);
    if (timer.expiry() <= std::chrono::steady_clock::now()) co_return;
    const auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return;
  }
}

// The destination's stream failed before its response head (moved.head_failure). The client's
// stream is answered as over HTTP/1.1 (upstream_fault): 504 for a silent destination, 502 for
// a reset or a closed connection (retryable for an idempotent method), 502
// UPSTREAM_PROTOCOL_ERROR for a broken one. A stream the destination refused, which it did not
// act on (RFC 9113 section 8.7), is refused to the client in turn, whose client retries it as
// it would have. The failure has its line either way.
asio::awaitable<void> head_failed(Session& s, h2::ServerExchange& ex, Moved& moved,
                                  StreamResponder& responder, std::vector<std::uint8_t>& buf) {
  // Nobody to tell: the client reset its stream (and pump_request the upstream one), the
  // tripwire refused the body (which has its own line), or the daemon is stopping.
  if (ex.closed() || moved.tripped || moved.unsignable || s.aborted) co_return;
  const std::string shown = s.intercepted->display();
  moved.reported = true;
  if (moved.head_failure == h2::Error::refused) {
    responder.name_request(s);
    s.record_failure(policy::EntryMode::http, Errc::upstream_connect_failed, shown,
                     s.intercepted_port, 0, telemetry::Phase::headers,
                     telemetry::Ended::upstream_reset);
    ex.reset(h2::ResetCode::refused_stream);
    co_return;
  }
  const UpstreamFault f = upstream_fault(s, moved.head_failure, ex.request().method);
  co_await drain_body(ex, buf);  // a client still uploading then sees the response
  co_await s.fail(policy::EntryMode::http, f.code, shown, s.intercepted_port, f.message,
                  telemetry::Phase::headers, &responder, f.retryable, f.ended);
}

// The destination's response head names a coding sandgate cannot decode to scan it: the
// client's stream is answered 502 UPSTREAM_ENCODING_UNSUPPORTED (its line written).
asio::awaitable<void> refuse_undecodable(Session& s, h2::ServerExchange& ex, Moved& moved,
                                         StreamResponder& responder,
                                         std::vector<std::uint8_t>& buf) {
  moved.reported = true;
  if (ex.closed() || s.aborted) co_return;
  co_await drain_body(ex, buf);
  co_await s.fail(policy::EntryMode::http, Errc::upstream_encoding_unsupported,
                  s.intercepted->display(), s.intercepted_port,
                  "the destination's response is in a Content-Encoding sandgate cannot decode to "
                  "scan it for the credential",
                  telemetry::Phase::headers, &responder, {}, telemetry::Ended::upstream_close);
}

// The upstream stream's response to the client: head, body, trailers. `uploading`: the
// request's body is still being sent (pump_request runs beside).
asio::awaitable<void> pump_response(Session& s, h2::ServerExchange& ex, h2::ClientExchange& up,
                                    Moved& moved, bool uploading) {
  // The head is awaited under a deadline of the stream's own, as the HTTP/1.1 bridge's is. A
  // failure is answered by head_failed once pump_request is done too: resetting the upstream
  // stream here ends a pump_request still sending to it (one waiting for the client's next
  // bytes waits on, and the answer with it).
  using namespace asio::experimental::awaitable_operators;
  s.watchdog->arm(owed_head_deadline(s));
  h2::error_code head_ec;
  if (uploading) {
    // The deadline moves with each piece of the body sent (head_deadline).
    const auto head = co_await (up.read_response_head() || head_deadline(s, moved));
    head_ec = head.index() == 1 ? h2::error_code(asio::error::timed_out) : std::get<0>(head);
  } else {
    // The request was sent whole: a fixed deadline, kept by the stream's own wake-up.
    const auto deadline = moved.last_sent + s.limits().idle_timeout;
    head_ec = co_await up.read_response_head(deadline);
  }
  if (head_ec) {
    const bool refused =
        head_ec == h2::Error::stream_reset &&
        up.reset_code() == static_cast<std::uint32_t>(h2::ResetCode::refused_stream);
    moved.head_failure = refused ? h2::Error::refused : head_ec;
  }
  if (moved.head_failure) {
    up.reset();  // a stream still open at the destination (it timed out) is cancelled there
    co_return;
  }
  moved.status = up.response().status;
  h2::Fields fields = redacted(up.take_response_fields(), moved.redact);
  const bool has_body = ex.request().method != "HEAD" && moved.status != 204 && moved.status != 304;
  if (!scrub_head(moved, fields, has_body)) {
    up.reset();  // answered once pump_request is done too (forward_h2)
    co_return;
  }
  // A response the destination ended with its head (HEADERS with END_STREAM) ends with ours;
  // one with a body ends with its last DATA frame, or with its trailers (body_ended() is
  // known as soon as the destination's last frame arrived). An empty DATA frame with
  // END_STREAM goes out only when the destination sent one itself.
  const bool bodyless = !moved.scrub && up.body_ended() && up.trailers().empty();
  if (co_await ex.send_response_head(moved.status, fields, bodyless)) co_return;
  if (bodyless) {
    moved.complete = true;
    co_return;
  }
  ChunkBuffer chunk;
  std::vector<std::uint8_t>& buf = chunk.bytes();
  for (;;) {
    auto [ec, n] = co_await up.read_body(buf);
    if (ec) {
      ex.reset();
      co_return;
    }
    moved.down += n;
    s.watchdog->arm(s.limits().idle_timeout);
    const std::span<const std::uint8_t> bytes(buf.data(), n);
    if (n > 0 && !up.body_ended()) {
      if (co_await send_body(ex, moved, bytes, false, false)) co_return;
      continue;
    }
    // The last bytes (with what the redactor held back), then the trailers if there are any.
    const h2::Fields trailers = redacted(up.trailers(), moved.redact);
    ec = co_await send_body(ex, moved, bytes, true, trailers.empty());
    if (!ec && !trailers.empty()) ec = co_await ex.send_trailers(trailers);
    moved.complete = !ec;
    co_return;
  }
}

// Beast adds a chunked body's trailer fields after the header's: those go out as trailers.
h2::Fields chunk_trailers(const bhttp::response<bhttp::buffer_body>& res,
                          std::size_t header_fields) {
  h2::Fields trailers;
  std::size_t i = 0;
  for (const auto& f : res) {
    if (i++ >= header_fields)
      trailers.push_back({std::string(f.name_string()), std::string(f.value())});
  }
  return trailers;
}

// The sandbox's HTTP/2 connection to the destination for one more stream: the one the client
// connection's last stream took, or the least busy, with room; else, after a dial in progress, what
// it brought; else one more, dialled here, while fewer are open than client connections use them;
// else the least busy (the stream waits for a slot there). Null when none is usable and none could
// be had (the destination is down, or answered ALPN with HTTP/1.1: that connection is left in `h1`
// when given). A stream that waited for another's dial does not dial again: a destination that is
// down costs one failed dial per wave of streams, not one after another.
asio::awaitable<std::shared_ptr<SharedH2>> h2_connection(Session& s, SharedH2Registry::Share& share,
                                                         TrackedPtr* h1 = nullptr) {
  H2Origin& origin = share.origin();
  if (auto last = share.last_with_room()) co_return last;
  for (bool waited = false;;) {
    if (auto room = origin.with_room()) co_return room;
    if (origin.dialling()) {
      co_await origin.dial_ended();
      waited = true;
      continue;
    }
    if (waited || !origin.may_dial()) co_return origin.least_busy();
    const SharedH2Registry::Share::Dialing dialing(share);
    TrackedPtr up = co_await connect_upstream(s, *s.intercepted, s.intercepted_port, true, nullptr);
    if (up && alpn_is_h2(up->conn->tls->stream.native_handle())) co_return share.add(up->release());
    if (h1 != nullptr) *h1 = std::move(up);
    co_return origin.least_busy();
  }
}

// h2 to h2, over `conn` (h2_connection).
asio::awaitable<void> forward_h2(Session& s, Upstreams& ups, std::shared_ptr<SharedH2> conn,
                                 h2::ServerExchange& ex, const h2::RequestHead& head,
                                 std::vector<std::uint8_t>& buf, std::size_t first, Moved& moved,
                                 StreamResponder& responder) {
  using namespace asio::experimental::awaitable_operators;
  const SharedH2Registry::Lease lease(*ups.h2, std::move(conn));
  auto opened = co_await lease.client().request(head, first == 0);
  if (!opened) {
    // The upstream connection is going away (GOAWAY, closed): the client may retry.
    s.request_method = ex.request().method;
    s.request_path = ex.request().path;
    s.record_failure(policy::EntryMode::http, Errc::upstream_connect_failed,
                     s.intercepted->display(), s.intercepted_port, 0, telemetry::Phase::request);
    ex.reset(h2::ResetCode::refused_stream);
    moved.reported = true;
    co_return;
  }
  h2::ClientExchange& up = *opened;
  ups.h2_streams.push_back(&up);
  struct Unlist {
    Upstreams& ups;
    h2::ClientExchange* up;
    ~Unlist() { std::erase(ups.h2_streams, up); }
  } unlist{ups, &up};
  moved.last_sent = std::chrono::steady_clock::now();
  if (first == 0) {
    co_await pump_response(s, ex, up, moved, false);
  } else {
    co_await (pump_request(s, ex, up, buf, first, moved) && pump_response(s, ex, up, moved, true));
  }
  if (moved.head_failure) co_await head_failed(s, ex, moved, responder, buf);
  if (moved.undecodable == Moved::Undecodable::head) {
    co_await refuse_undecodable(s, ex, moved, responder, buf);
  }
}

// h2 to HTTP/1.1: the request head rebuilt, the body chunked unless it has a length, the
// response's head, body and trailers back as HTTP/2.
asio::awaitable<void> forward_h1(Session& s, Upstreams& ups, h2::ServerExchange& ex,
                                 const h2::RequestHead& head, bhttp::fields& fields,
                                 std::vector<std::uint8_t>& buf, std::size_t first, Moved& moved,
                                 StreamResponder& responder) {
  const policy::Host& host = *s.intercepted;
  if (!co_await wait_h1_turn(s, ups, ex)) {
    moved.reported = true;  // a cancelled request has no line
    co_return;
  }
  const H1Turn turn{ups};
  TrackedPtr tracked;
  while (!ups.idle.empty() && !tracked) {
    tracked = std::move(ups.idle.back());
    ups.idle.pop_back();
    // One the destination closed while it was idle is dropped (another takes its place).
    if (!upstream_reusable(*tracked->conn)) tracked.reset();
  }
  if (!tracked) {
    if (auto pooled = s.deps.upstreams->take(s, upstream_authority(s, host, s.intercepted_port)))
      tracked = std::make_unique<Tracked>(s, std::move(pooled));
  }
  if (!tracked) {
    tracked = co_await connect_upstream(s, host, s.intercepted_port, false, &responder);
    if (!tracked) {
      moved.reported = true;
      co_return;
    }
  }
  if (ex.closed()) {
    // The client reset the stream while we dialled: nothing is sent, the connection (fresh,
    // or idle from the pool) is kept for the next stream.
    tracked->conn->idle = true;
    ups.idle.push_back(std::move(tracked));
    moved.reported = true;  // a cancelled request has no line
    co_return;
  }
  UpstreamConn* up = tracked->conn.get();
  up->idle = false;
  UpstreamStream& stream = up->tls->stream;

  bhttp::request<bhttp::empty_body> req = h2::to_h1_request(head, head.path, fields);
  const bool length = req.has_content_length();
  const bool chunked = first > 0 && !length;
  if (chunked) req.set(bhttp::field::transfer_encoding, "chunked");
  bhttp::request_serializer<bhttp::empty_body> sr(req);
  if (auto [ec, n] = co_await bhttp::async_write_header(stream, sr, use_tuple); ec) {
    co_return;
  }
  for (std::size_t n = first; first > 0;) {
    const std::span<const std::uint8_t> go = pass_body(moved, {buf.data(), n}, n == 0);
    if (moved.tripped || moved.unsignable) {
      // The destination saw the head and part of the body: its connection is reset, so it
      // never sees the request end.
      boost::system::error_code ignored;
      up->socket.set_option(asio::socket_base::linger(true, 0), ignored);
      co_return;
    }
    if (!go.empty()) {
      moved.up += go.size();
      const asio::const_buffer bytes(go.data(), go.size());
      if (chunked) {
        if (auto [ec, w] = co_await asio::async_write(stream, bhttp::make_chunk(bytes), use_tuple);
            ec) {
          co_return;
        }
      } else if (auto [ec, w] = co_await asio::async_write(stream, bytes, use_tuple); ec) {
        co_return;
      }
      s.watchdog->arm(s.limits().idle_timeout);
    }
    if (n == 0) break;
    auto [ec, got] = co_await ex.read_body(buf);
    if (ec) co_return;
    n = got;
  }
  if (!trailers_pass(moved, ex.trailers())) {
    boost::system::error_code ignored;
    up->socket.set_option(asio::socket_base::linger(true, 0), ignored);
    co_return;
  }
  if (chunked) {
    bhttp::fields trailers;
    h2::to_h1(ex.trailers(), trailers);
    if (auto [ec, w] =
            co_await asio::async_write(stream, bhttp::make_chunk_last(trailers), use_tuple);
        ec) {
      co_return;
    }
  }

  // The response head is awaited under a deadline of this stream's own, so a destination that
  // never answers ends this stream with a 504 (as over HTTP/1.1), not the client's connection
  // and its other streams: the session's deadline is pushed past the stream's.
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer deadline(stream.get_executor(), s.limits().idle_timeout);
  s.watchdog->arm(owed_head_deadline(s));
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
  for (;;) {  // 1xx interim responses are dropped: the HTTP/2 side cannot send them
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(s.limits().max_header_bytes));
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (head.method == "HEAD") parser->skip(true);
    const auto read =
        co_await (read_header_into(stream, up->buffer, *parser) || deadline.async_wait(use_tuple));
    if (const auto ec = read.index() == 0 ? std::get<0>(read) : asio::error::timed_out) {
      const std::string shown = host.display();
      const UpstreamFault f = upstream_fault(s, ec, head.method);
      co_await s.fail(policy::EntryMode::http, f.code, shown, s.intercepted_port, f.message,
                      telemetry::Phase::headers, &responder, f.retryable, f.ended);
      moved.reported = true;
      co_return;
    }
    if (parser->get().result_int() >= 200) break;
  }
  auto& p = *parser;
  auto& res = p.get();
  moved.status = static_cast<int>(res.result_int());
  http::strip_hop_by_hop(res.base());
  h2::Fields out_fields = redacted(h2::from_h1(res.base()), moved.redact);
  if (!scrub_head(moved, out_fields, !p.is_done())) {
    co_await refuse_undecodable(s, ex, moved, responder, buf);
    co_return;  // the upstream connection, its response unread, is closed
  }
  std::size_t header_fields = 0;
  for (auto it = res.begin(); it != res.end(); ++it) ++header_fields;
  // The upstream connection is free once its response was read whole: back to the pool
  // before the end goes to the client, who may send the next request on another stream
  // before this coroutine resumes.
  const auto response_read = [&] {
    if (!p.keep_alive()) return;
    up->idle = true;
    ups.idle.push_back(std::move(tracked));
  };
  const bool bodyless = p.is_done();
  if (bodyless) response_read();
  if (co_await ex.send_response_head(moved.status, out_fields, bodyless)) co_return;
  // Each read's bytes go out as they come; the read that completes the body (Beast knows it
  // from Content-Length or the last chunk) sends its bytes with END_STREAM, or with the
  // trailers after them. An empty DATA frame ends the stream only when the end came in a read
  // of its own (a last chunk in a later segment, a body that ends with the connection).
  h2::Fields trailers;
  for (bool done = bodyless; !done;) {
    res.body().data = buf.data();
    res.body().size = buf.size();
    auto ec = co_await read_some_into(stream, up->buffer, p);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) {
      ex.reset();
      co_return;
    }
    const std::size_t got = buf.size() - res.body().size;
    moved.down += got;
    s.watchdog->arm(s.limits().idle_timeout);
    done = p.is_done();
    if (done) {
      trailers = chunk_trailers(res, header_fields);
      response_read();
    }
    if (co_await send_body(ex, moved, {buf.data(), got}, done, done && trailers.empty())) {
      co_return;
    }
  }
  h2::error_code ec;
  if (!trailers.empty()) {
    const h2::Fields out = redacted(h2::sendable_fields(trailers), moved.redact);
    ec = co_await ex.send_trailers(out);
  }
  moved.complete = !ec;
}

// What an HTTP/1.1 client could not send is refused here as it is there, before any filter
// reads it or any upstream, HTTP/1.1 or HTTP/2, gets it: nghttp2 lets a '#', a '\', a '"' or a
// non-ASCII byte through in :path (found by tests/fuzz/h2_h1_head_fuzz.cpp), which forward_h1
// would write into an HTTP/1.1 request line. Errc::ok when the request may go on.
Errc h1_refusal(const h2::RequestHead& head) {
  std::vector<std::string_view> values;
  values.reserve(head.fields.size());
  for (const h2::Field& f : head.fields) values.push_back(f.value);
  return http::check_h2_request(head.method, head.path, values);
}

// A stream's request body read whole before the request goes on (BodyReader); the stream then
// forwards these bytes as its body's first (and only) read.
class WholeH2Body final : public BodyReader {
 public:
  explicit WholeH2Body(h2::ServerExchange& ex) : ex_(ex) {}

  asio::awaitable<WholeBody> read_whole(std::size_t limit) override {
    read_ = true;
    std::vector<std::uint8_t> chunk(kChunk);
    while (!ex_.body_ended()) {
      auto [ec, n] = co_await ex_.read_body(chunk);
      if (ec) co_return WholeBody{{}, Errc::malformed_request};
      if (n == 0) break;
      if (bytes_.size() + n > limit) co_return WholeBody{{}, Errc::request_body_too_large};
      bytes_.insert(bytes_.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
    }
    co_return WholeBody{{reinterpret_cast<const char*>(bytes_.data()), bytes_.size()}};
  }
  // Whether the body was read (then all of it is in bytes()).
  bool read() const { return read_; }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  h2::ServerExchange& ex_;
  bool read_ = false;
  std::vector<std::uint8_t> bytes_;
};

// A stream whose request body had to stop (Moved::tripped or Moved::unsignable), told why. A
// placeholder in the body, going where it may not, is told as one in a header is: a 403 on
// this stream, unless the destination's answer had begun and the stream is reset. An upload
// whose chunks could not be signed again had the destination's stream reset before its end;
// the client is told why, as over HTTP/1.1. (A coroutine of its own, so that what it needs is
// not in the frame of every stream.)
template <class NameRequest>
asio::awaitable<void> refuse_body(Session& s, h2::ServerExchange& ex, const Moved& moved,
                                  RequestBody& body, const std::string& shown, std::uint16_t port,
                                  const policy::Host& host, StreamResponder& responder,
                                  std::vector<std::uint8_t>& buf, NameRequest& name_request) {
  if (moved.tripped) {
    const policy::Decision d = policy::placeholder_denial(body.tripwire()->check().credential);
    if (moved.status != 0) {
      ex.reset();
    } else {
      co_await drain_body(ex, buf);
    }
    name_request();
    co_await s.deny(policy::EntryMode::http, shown, port, d, &host, {}, &responder);
  } else {
    co_await drain_body(ex, buf);
    name_request();
    const std::string why =
        "the upload's chunks cannot be signed again: " + std::string(body.why());
    co_await s.fail(policy::EntryMode::http, Errc::signature_not_resignable, shown, port, why,
                    telemetry::Phase::request, &responder, false, telemetry::Ended::malformed);
  }
  if (!ex.response_ended()) ex.reset();
}

// The line of a stream that was forwarded (whatever became of it), and its metrics.
void record_stream(Session& s, const std::string& shown, std::uint16_t port, const Moved& moved,
                   const policy::Decision& decision, const secrets::Redactor* redactor,
                   std::chrono::steady_clock::time_point started) {
  telemetry::AuditRecord r = s.record(policy::EntryMode::http);
  // A body that could not be decoded was cut off (its stream reset): the line says why.
  const bool undecodable = moved.undecodable == Moved::Undecodable::body;
  r.event = undecodable ? code_name(Errc::upstream_encoding_unsupported)
                        : std::string_view("http_request");
  if (undecodable) r.reason = "response_not_decodable";
  r.outcome = moved.complete ? "success" : "failure";
  r.host = shown;
  r.port = port;
  r.http_status = moved.status;
  r.bytes_up = moved.up;
  r.bytes_down = moved.down;
  if (redactor != nullptr) r.redactions = redactor->redactions();
  if (moved.scrub) r.redactions += moved.scrub->redactions();
  r.http_version = "2";
  r.rule = decision.rule;
  if (decision.audit) r.would_deny = policy::reason_name(decision.reason);
  r.tls_sni = s.client_sni();
  r.ended =
      moved.complete ? telemetry::Ended::completed : s.ended(telemetry::Ended::upstream_close);
  if (!moved.complete) r.phase = telemetry::Phase::body;
  r.duration = std::chrono::steady_clock::now() - started;
  auto& shared = *s.deps.shared;
  shared.audit->write(r);
  if (undecodable) shared.metrics->error(Errc::upstream_encoding_unsupported);
  shared.metrics->request(telemetry::Mode::https,
                          moved.complete ? telemetry::Outcome::allowed : telemetry::Outcome::error);
  shared.metrics->bytes(telemetry::Direction::upstream, moved.up);
  shared.metrics->bytes(telemetry::Direction::downstream, moved.down);
}

// One stream: decided, forwarded, logged.
asio::awaitable<void> serve_stream(Session& s, Upstreams& ups, h2::ServerExchange& ex) {
  const h2::RequestHead& head = ex.request();
  // A stream the client reset before its handler ran (CVE-2023-44487 opens and resets
  // streams at once) is neither decided nor forwarded: work for a cancelled request is what
  // makes rapid reset pay. Its reset counts against the connection's reset limits.
  if (ex.closed()) co_return;
  s.watchdog->arm(s.limits().idle_timeout);
  const auto authority = policy::parse_authority(head.authority);
  const policy::Host host =
      authority ? policy::normalize_host(authority->host) : policy::normalize_host(head.authority);
  const std::uint16_t port = authority && authority->port ? *authority->port : s.intercepted_port;
  bhttp::fields fields;
  h2::to_h1(head.fields, fields);

  StreamResponder responder(ex);
  const std::string shown = host.display();
  if (const Errc bad = h1_refusal(head); bad != Errc::ok) {
    s.request_method = head.method;
    s.request_path = head.path;
    const std::string_view why = "not a request HTTP/1.1 could carry";
    co_await s.fail(policy::EntryMode::http, bad, shown, port, why, telemetry::Phase::unset,
                    &responder);
    s.request_method = s.request_path = {};
    co_return;
  }

  ProxiedRequest request;
  request.method = head.method;
  request.scheme = "https";
  request.host = &host;
  request.port = port;
  request.path = head.path;
  request.fields = &fields;
  request.intercepted = &*s.intercepted;
  request.intercepted_port = s.intercepted_port;
  request.authority = head.authority;
  WholeH2Body whole(ex);
  request.body = &whole;
  // Every line about this stream names it; set before each report, which reads them at once
  // (other streams of the connection set their own in between).
  const auto name_request = [&] {
    s.request_method = head.method;
    s.request_path = head.path;
    s.request_credential = request.credential;
    s.request_fingerprint = request.token ? std::string_view(request.token->fingerprint) : "";
  };
  // No view of this stream's head outlives it.
  struct Forget {
    Session& s;
    ~Forget() {
      s.request_method = s.request_path = {};
      s.request_credential = s.request_fingerprint = {};
    }
  } forget{s};
  name_request();
  const ChainResult result = co_await filter_request(s, request);
  name_request();  // the credential a rule wanted, for a 503's line too
  if (!result.allowed && result.error != Errc::ok) {
    if (!ex.body_ended()) {
      // A body left unread (one over the bound a filter reads whole): drained first.
      std::vector<std::uint8_t> drained(kChunk);
      co_await drain_body(ex, drained);
    }
    s.request_endpoint_status = result.endpoint_status;  // read and reset by the 503's line
    s.request_endpoint_error = result.endpoint_error;
    co_await s.fail(policy::EntryMode::http, result.error, shown, port, result.message,
                    telemetry::Phase::unset, &responder, result.retryable);
    co_return;
  }
  if (!result.allowed) {
    co_await s.deny(policy::EntryMode::http, shown, port, result.decision, &host, {}, &responder);
    co_return;
  }
  // The head that goes on, its fields as the filters left them (never a copy of the client's).
  const h2::RequestHead out{head.method, head.scheme, head.authority,
                            forwarded_target(s, host, port, head.path), h2::from_h1(fields)};

  const auto started = std::chrono::steady_clock::now();
  // The request body's buffer, which forward_h1 reads the response through too; a request
  // that ended with its head (most) going over HTTP/2 needs none.
  std::optional<ChunkBuffer> chunk;
  std::vector<std::uint8_t> none;
  const auto buffer = [&]() -> std::vector<std::uint8_t>& {
    return chunk ? chunk->bytes() : chunk.emplace().bytes();
  };
  std::vector<std::uint8_t>& buf = whole.read() || ex.body_ended() ? none : buffer();
  std::size_t first = 0;
  if (whole.read()) {
    // Read whole by a filter: that is the body (and the stream's buffer, at least kChunk).
    first = whole.bytes().size();
    buf = std::move(whole.bytes());
    buf.resize(std::max(first, kChunk));
  } else if (!ex.body_ended()) {
    auto [read_ec, n] = co_await ex.read_body(buf);
    if (read_ec) co_return;  // reset (or the connection ended) before forwarding
    first = n;
  }
  if (ex.closed()) co_return;
  Moved moved;
  std::unique_ptr<secrets::Redactor> redactor;
  if (!request.secret_forms.empty()) {
    redactor = std::make_unique<secrets::Redactor>(request.secret_forms);
    moved.redact = redactor.get();
    moved.forms = &request.secret_forms;
  }
  // The body is scanned for placeholders on its way out, as the head was, and an upload's
  // chunks signed again.
  std::unique_ptr<RequestBody> body;
  if (first > 0) {
    body = std::make_unique<RequestBody>();
    body->scan(s, host, port, true);
    if (request.resign_chunks) body->resign(std::move(request.resign_chunks));
    if (!body->idle()) moved.body = body.get();
  }
  std::shared_ptr<SharedH2> over_h2;
  if (ups.h2) over_h2 = co_await h2_connection(s, *ups.h2);
  if (over_h2) {
    co_await forward_h2(s, ups, std::move(over_h2), ex, out, buf, first, moved, responder);
  } else {
    co_await forward_h1(s, ups, ex, out, fields, buf.empty() ? buffer() : buf, first, moved,
                        responder);
  }
  if (moved.tripped || moved.unsignable) {
    co_await refuse_body(s, ex, moved, *body, shown, port, host, responder, buf, name_request);
    co_return;
  }
  if (!moved.complete && !ex.response_ended()) ex.reset();
  if (moved.reported) co_return;
  name_request();
  record_stream(s, shown, port, moved, result.decision, redactor.get(), started);
}

// The line of a connection the codec ended for the client's doing (a flood, a protocol
// error): HTTP2_CONNECTION_ERROR, event.reason naming which limit (h2::ServerConnection::
// error_cause). The streams it had in flight have their own lines.
void record_connection_error(Session& s, std::string_view cause) {
  const std::string shown = s.intercepted->display();
  telemetry::AuditRecord r = s.record(policy::EntryMode::http);
  r.event = code_name(Errc::http2_connection_error);
  r.outcome = "failure";
  r.host = shown;
  r.port = s.intercepted_port;
  r.reason = cause;
  r.http_version = "2";
  r.tls_sni = s.client_sni();
  auto& shared = *s.deps.shared;
  shared.audit->write(r);
  shared.metrics->error(Errc::http2_connection_error);
  shared.metrics->connection(telemetry::Mode::https, telemetry::Outcome::error);
}

// The line of a request the codec answered by itself (h2::ServerConnection::on_refused): 431
// for a head over max_header_list_bytes (an HPACK bomb among them), 405 for a CONNECT inside
// the intercepted stream, 400 for a missing or second authority. Nothing was forwarded.
void record_refused(Session& s, const h2::RequestHead& head, int status) {
  const Errc code = status == 431   ? Errc::headers_too_large
                    : status == 405 ? Errc::unsupported_target
                                    : Errc::malformed_request;
  s.request_method = head.method;
  s.request_path = head.path;
  s.record_failure(policy::EntryMode::http, code, s.intercepted->display(), s.intercepted_port,
                   status);
  s.request_method = s.request_path = {};
}

// The GOAWAY of a connection ended for a flood is written, but the flood is still arriving:
// closing now, with unread bytes in our receive buffer, sends a TCP reset, and the client's
// kernel drops the GOAWAY before the client reads it. So, as nginx and nghttpx do, a
// lingering close (linger_close: our side shut, then what still comes read and dropped for a
// bounded time and size). A client that reads nothing (a PING or SETTINGS flood whose ACKs
// fill the socket) would hold what we sent in our kernel for as long as it likes: what is
// still unsent then is dropped with a reset.
asio::awaitable<void> linger(Session& s) {
  co_await linger_close(s);
  tcp::socket& socket = s.client;
  int unsent = 0;
  if (socket.is_open() && ::ioctl(socket.native_handle(), SIOCOUTQ, &unsent) == 0 && unsent > 0) {
    s.reset_client();
  }
}

}  // namespace

asio::awaitable<void> serve_h2(Session& s) {
  Upstreams ups(s);
  const policy::Host host = *s.intercepted;
  // The destination's protocol is learnt once, before the first stream: from the sandbox's
  // HTTP/2 connections to it on this worker (shared_h2.hpp), else from ALPN with it: every
  // request on this connection must address it anyway (421 otherwise). An idle HTTP/1.1
  // connection in the worker's pool proves nothing (an HTTP/1.1 client left it) and is used
  // only once ALPN has said the destination speaks only HTTP/1.1.
  // (Quietly: a failure is reported by the first stream, which dials again over HTTP/1.1.)
  // A stream to the DNS sink is never dialled: its requests are only refused.
  if (!s.sunk) {
    ups.h2 = s.deps.h2_upstreams->share(s, upstream_authority(s, host, s.intercepted_port));
    TrackedPtr h1;
    if (ups.h2 && !ups.h2->origin().least_busy()) {
      const std::shared_ptr<SharedH2> first = co_await h2_connection(s, *ups.h2, &h1);
      if (!first) ups.h2.reset();
    }
    if (h1) {
      h1->conn->idle = true;
      ups.idle.push_back(std::move(h1));
    }
  }
  s.watchdog->arm(s.limits().idle_timeout);
  h2::ServerConnection<ClientStream> conn(s.tls->stream);
  auto handler = [&s, &ups](h2::ServerExchange& ex) -> asio::awaitable<void> {
    co_await serve_stream(s, ups, ex);
  };
  conn.on_refused(
      [&s](const h2::RequestHead& head, int status) { record_refused(s, head, status); });
  // The client is gone (or its deadline passed): its streams on the shared connections are
  // reset, which ends the handlers waiting on them.
  conn.on_ended([&ups] {
    for (h2::ClientExchange* up : std::vector(ups.h2_streams)) up->reset();
  });
  co_await conn.run(handler);
  ups.h2.reset();
  // HTTP/1.1 connections idle between responses outlive the client connection.
  for (TrackedPtr& idle : ups.idle) s.deps.upstreams->put(s, idle->release());
  ups.idle.clear();
  ups.settle();
  if (!conn.error_cause().empty()) {
    record_connection_error(s, conn.error_cause());
    co_await linger(s);
  }
}

}  // namespace sandgate::proxy
