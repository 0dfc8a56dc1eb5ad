// Absolute-form http:// forwarding: one request and its response, bodies streamed through a
// fixed buffer in both directions (never buffered whole), hop-by-hop headers removed.
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>

#include "common/ascii.hpp"
#include "h2/h2.hpp"
#include "http/request_head.hpp"
#include "policy/path.hpp"
#include "proxy/interception.hpp"
#include "proxy/interception/request_body.hpp"
#include "proxy/read_message.hpp"
#include "proxy/request_filter.hpp"
#include "proxy/send_now.hpp"
#include "proxy/session.hpp"
#include "proxy/tls_streams.hpp"
#include "proxy/upstream.hpp"
#include "proxy/upstreams/pool.hpp"
#include "secrets/redactor.hpp"
#include "secrets/response_scrubber.hpp"
#include "secrets/tripwire.hpp"

namespace sandgate::proxy {

namespace {

namespace bhttp = boost::beast::http;
constexpr std::size_t kBodyChunk = 16 * 1024;

// A chunked request's trailer may not carry framing or routing: Beast adds trailer fields to
// the header's, where a Content-Length, a second Transfer-Encoding or a second Host would mean
// the client framed or addressed the message twice (trailers are not forwarded).
bool trailer_is_clean(const bhttp::fields& f) {
  return f.count(bhttp::field::content_length) == 0 &&
         f.count(bhttp::field::transfer_encoding) <= 1 && f.count(bhttp::field::host) <= 1;
}

// How relaying one message ended: `in` (reading it) or `out` (writing it) failed with `ec`;
// `tripped`: the request body's placeholder tripwire refused it (nothing of the bytes that
// held the placeholder went out); `unsignable`: its chunks could not be signed again (the
// body's framing was not aws-chunked's); `undecodable`: a scrubbed response's body could not be
// decoded (nothing undecoded went out, nor the end of the message).
struct Relayed {
  enum class Side { none, in, out, tripped, unsignable, undecodable } side = Side::none;
  boost::system::error_code ec;
  bool ok() const { return side == Side::none; }
};

// Streams one message from `in` to `out`: the (already edited) header, then the body
// through a fixed buffer as bytes arrive (server-sent events, streamed responses),
// re-framed as the header says. Every transfer pushes the idle deadline forward.
// (A response scanned for a credential goes through relay_scrubbed instead.) With `rb` (a
// request), the body goes through it (RequestBody). Only scanned for placeholders, it is
// scanned in place: the last kHoldBack bytes of each chunk wait in front of the next one until
// the tripwire decided them.
// `last`: `out` is shut down for sending right after this message. Its last piece is then sent
// with MSG_MORE (plain sockets, unchunked messages), so the shutdown's FIN leaves in the same
// segment: the receiver gets the end of the message and of the connection at once, and a
// segment and its acknowledgement are saved (bench/README.md, "Segments per exchange").
template <bool isRequest, class Allocator, class In, class Out>
asio::awaitable<Relayed> relay_message(In& in, boost::beast::flat_buffer& in_buffer,
                                       bhttp::parser<isRequest, bhttp::buffer_body, Allocator>& p,
                                       Out& out, std::uint64_t& bytes, Session& s, bool last,
                                       RequestBody* rb = nullptr) {
  using Side = Relayed::Side;
  const auto idle = s.limits().idle_timeout;
  // A message sent as it came (not re-framed as chunked) is written by hand: its header as one
  // piece, then the body bytes as they are. Beast's serializer frames the chunked ones.
  // The serializer (400 bytes) is on the heap, and only for those: in this coroutine's frame
  // it would take the frame past what Asio's per-thread cache recycles (about 1 KiB).
  const bool plain = !p.get().chunked();
  using Serializer =
      bhttp::serializer<isRequest, bhttp::buffer_body, bhttp::basic_fields<Allocator>>;
  std::unique_ptr<Serializer> sr;
  std::string head;  // plain: the header, until it has gone out
  if (plain) {
    head = http::head_text(p.get().base());
  } else {
    sr = std::make_unique<Serializer>(p.get());
  }
  // The header goes out at once when no body bytes are at hand yet (a streamed response must
  // not wait for its first chunk); otherwise it goes out together with them, in one write.
  if (!p.is_done() && in_buffer.size() == 0) {
    p.get().body().data = nullptr;
    p.get().body().size = 0;
    p.get().body().more = true;
    boost::system::error_code ec;
    std::size_t n = 0;
    if (plain) {
      n = send_now_if_plain(out, asio::buffer(head), ec);
      if (!ec && n < head.size()) {
        std::size_t rest = 0;
        std::tie(ec, rest) = co_await asio::async_write(
            out, asio::buffer(head.data() + n, head.size() - n), use_tuple);
        n += rest;
      }
    } else {
      std::tie(ec, n) = co_await bhttp::async_write_header(out, *sr, use_tuple);
    }
    if (ec) co_return Relayed{Side::out, ec};
    head.clear();
    bytes += n;
    s.watchdog->arm(idle);
  }
  // Only for a message with a body, and not zeroed: kHold bytes of room for what `trip` held
  // back, in front of the chunk read.
  constexpr std::size_t kHold = secrets::BodyTripwire::kHoldBack;
  // A body of known length smaller than kBodyChunk gets a buffer of its size (a small
  // response then costs a small allocation, not 16 KiB); the bytes and writes are the same.
  const auto remaining = p.content_length_remaining();
  const std::size_t room =
      remaining ? static_cast<std::size_t>(std::min<std::uint64_t>(*remaining, kBodyChunk))
                : kBodyChunk;
  secrets::BodyTripwire* trip = rb != nullptr && rb->only_scanned() ? rb->tripwire() : nullptr;
  RequestBody* through = rb != nullptr && !rb->only_scanned() && !rb->idle() ? rb : nullptr;
  std::unique_ptr<char[]> chunk;
  std::size_t held = 0;             // bytes `trip` held back, just in front of chunk + kHold
  const char* held_from = nullptr;  // where they are until the write is done
  do {
    if (held_from != nullptr) std::memmove(chunk.get() + kHold - held, held_from, held);
    held_from = nullptr;
    if (!p.is_done()) {
      if (!chunk) chunk = std::make_unique_for_overwrite<char[]>(kHold + room);
      p.get().body().data = chunk.get() + kHold;
      p.get().body().size = room;
      auto ec = co_await read_some_into(in, in_buffer, p);
      if (ec == bhttp::error::need_buffer) ec = {};
      if constexpr (isRequest) {
        // Checked before the last chunk goes out, so the destination never sees the request end.
        if (!ec && p.is_done() && p.chunked() && !trailer_is_clean(p.get())) {
          ec = bhttp::error::bad_field;
        }
      }
      if (ec) co_return Relayed{Side::in, ec};
      p.get().body().size = room - p.get().body().size;
      char* data = chunk.get() + kHold;
      if (trip != nullptr) {
        data -= held;
        const std::size_t size = held + p.get().body().size;
        const std::size_t go = trip->feed({data, size}, p.is_done());
        if (trip->refused()) co_return Relayed{Side::tripped, {}};
        held = size - go;
        held_from = data + go;
        p.get().body().size = go;
      } else if (through != nullptr) {
        const std::string_view go = through->pass({data, p.get().body().size}, p.is_done());
        if (through->refused()) co_return Relayed{Side::tripped, {}};
        if (through->broken()) co_return Relayed{Side::unsignable, {}};
        data = const_cast<char*>(go.data());  // Beast's buffer_body only reads from it
        p.get().body().size = go.size();
      }
      // An empty buffer would be serialized as an empty chunk, which is the last-chunk marker.
      p.get().body().data = p.get().body().size > 0 ? data : nullptr;
      p.get().body().more = !p.is_done();
      s.watchdog->arm(idle);
    } else {
      p.get().body().data = nullptr;
      p.get().body().size = 0;
      p.get().body().more = false;
    }
    if (plain) {
      std::array<asio::const_buffer, 2> pieces{
          asio::buffer(head), asio::buffer(p.get().body().data, p.get().body().size)};
      if (const std::size_t size = asio::buffer_size(pieces); size > 0) {
        boost::system::error_code ec;
        std::size_t n = send_now_if_plain(out, pieces, ec, last && p.is_done() ? MSG_MORE : 0);
        if (!ec && n < size) {
          consume(pieces, n);
          std::size_t rest = 0;
          std::tie(ec, rest) = co_await asio::async_write(out, pieces, use_tuple);
          n += rest;
        }
        if (ec) co_return Relayed{Side::out, ec};
        head.clear();
        bytes += n;
        s.watchdog->arm(idle);
      }
    } else {
      auto [ec, n] = co_await bhttp::async_write(out, *sr, use_tuple);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return Relayed{Side::out, ec};
      bytes += n;
      s.watchdog->arm(idle);
    }
  } while (plain ? !p.is_done() || !head.empty() : !sr->is_done());
  co_return Relayed{};
}

// Writes all of `buffers` to `out`, counting them and pushing the idle deadline forward.
template <class Out, class Buffers>
asio::awaitable<boost::system::error_code> write_counted(Out& out, const Buffers& buffers,
                                                         std::uint64_t& bytes, Session& s) {
  auto [ec, n] = co_await asio::async_write(out, buffers, use_tuple);
  bytes += n;
  if (!ec) s.watchdog->arm(s.limits().idle_timeout);
  co_return ec;
}

// Streams a response from a host a credential is bound to: the (edited) header, then its body
// through `scrubber`, decoded and redacted (THREATS 22, 30), as chunks when the header says
// chunked, else as it comes (its length unchanged: no coding was undone; or the end of the
// connection ends it, for an HTTP/1.0 client). Memory: one read buffer and the scrubber's.
// When the body cannot be decoded, the message is left unfinished (no last chunk).
template <class Allocator, class In, class Out>
asio::awaitable<Relayed> relay_scrubbed(In& in, boost::beast::flat_buffer& in_buffer,
                                        bhttp::parser<false, bhttp::buffer_body, Allocator>& p,
                                        Out& out, std::uint64_t& bytes, Session& s,
                                        secrets::ResponseScrubber& scrubber) {
  using Side = Relayed::Side;
  const bool chunked = p.get().chunked();
  const std::string head = http::head_text(p.get().base());
  if (auto ec = co_await write_counted(out, asio::buffer(head), bytes, s)) {
    co_return Relayed{Side::out, ec};
  }
  std::vector<char> buf(kBodyChunk);
  for (bool last = p.is_done(); !scrubber.finished();) {
    std::size_t got = 0;
    if (!last) {
      p.get().body().data = buf.data();
      p.get().body().size = buf.size();
      auto ec = co_await read_some_into(in, in_buffer, p);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return Relayed{Side::in, ec};
      got = buf.size() - p.get().body().size;
      last = p.is_done();
      s.watchdog->arm(s.limits().idle_timeout);
    }
    scrubber.push({buf.data(), got}, last);
    for (std::string_view piece = scrubber.pull(); !piece.empty(); piece = scrubber.pull()) {
      boost::system::error_code ec;
      if (chunked) {
        ec = co_await write_counted(out, bhttp::make_chunk(asio::buffer(piece)), bytes, s);
      } else {
        ec = co_await write_counted(out, asio::buffer(piece), bytes, s);
      }
      if (ec) co_return Relayed{Side::out, ec};
    }
    if (scrubber.failed()) co_return Relayed{Side::undecodable, {}};
    if (last && !scrubber.finished()) co_return Relayed{Side::undecodable, {}};
  }
  if (chunked) {
    if (auto ec = co_await write_counted(out, bhttp::make_chunk_last(), bytes, s)) {
      co_return Relayed{Side::out, ec};
    }
  }
  co_return Relayed{};
}

// Replaces every occurrence of a secret in the header's field values (same length).
template <class Fields>
void redact_fields(secrets::Redactor& redactor, Fields& fields) {
  std::vector<std::pair<std::string, std::string>> all;
  bool changed = false;
  for (const auto& f : fields) {
    std::string value = redactor.redact(f.value());
    changed = changed || value != f.value();
    all.emplace_back(std::string(f.name_string()), std::move(value));
  }
  if (!changed) return;
  fields.clear();
  for (auto& [name, value] : all) fields.insert(name, value);
}

// What ended an exchange when a read from or a write to one side failed with `ec`.
telemetry::Ended ended_by(const Session& s, bool client, const boost::system::error_code& ec) {
  using telemetry::Ended;
  if (s.aborted) return Ended::shutdown;
  if (s.watchdog->expired() || ec == asio::error::timed_out) return Ended::timeout;
  if (ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    return client ? Ended::client_reset : Ended::upstream_reset;
  }
  const bool beast = ec.category() == make_error_code(bhttp::error::end_of_stream).category();
  if (beast && ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return Ended::malformed;  // Beast could not frame what that side sent
  }
  if (ec.category() == h2::category()) {  // an HTTP/2 stream of that side
    if (ec == h2::Error::stream_reset || ec == h2::Error::refused) {
      return client ? Ended::client_reset : Ended::upstream_reset;
    }
    if (ec != h2::Error::connection_closed && ec != h2::Error::goaway) return Ended::malformed;
  }
  return client ? Ended::client_close : Ended::upstream_close;
}

// Copies what `in` sends (bytes already buffered first) to `out` until either ends.
template <class In, class Out>
asio::awaitable<boost::system::error_code> pump(In& in, boost::beast::flat_buffer& buffered,
                                                Out& out, std::uint64_t& bytes, Session& s) {
  if (buffered.size() > 0) {
    auto [ec, n] = co_await asio::async_write(out, buffered.data(), use_tuple);
    if (ec) co_return ec;
    bytes += n;
    buffered.consume(n);
  }
  std::vector<char> chunk(kBodyChunk);
  for (;;) {
    auto [read_ec, n] = co_await in.async_read_some(asio::buffer(chunk), use_tuple);
    if (read_ec) co_return read_ec;
    s.watchdog->arm(s.limits().idle_timeout);
    auto [write_ec, written] =
        co_await asio::async_write(out, asio::buffer(chunk.data(), n), use_tuple);
    if (write_ec) co_return write_ec;
    bytes += written;
  }
}

// An upgraded (WebSocket) exchange: both directions relayed until the first ends, which
// closes the other (the protocol has its own closing handshake). What ended it.
template <class Client, class Upstream>
asio::awaitable<telemetry::Ended> relay_upgraded(Session& s, Client& client,
                                                 boost::beast::flat_buffer& client_buffer,
                                                 Upstream& upstream,
                                                 boost::beast::flat_buffer& upstream_buffer,
                                                 std::uint64_t& up, std::uint64_t& down) {
  using namespace asio::experimental::awaitable_operators;
  s.watchdog->arm(s.limits().idle_timeout);
  auto done = co_await (pump(client, client_buffer, upstream, up, s) ||
                        pump(upstream, upstream_buffer, client, down, s));
  const bool client_ended = done.index() == 0;
  const boost::system::error_code ec = client_ended ? std::get<0>(done) : std::get<1>(done);
  if (s.aborted) co_return telemetry::Ended::shutdown;
  if (s.watchdog->expired()) co_return telemetry::Ended::timeout;
  const bool reset = ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
  if (client_ended)
    co_return reset ? telemetry::Ended::client_reset : telemetry::Ended::client_close;
  co_return reset ? telemetry::Ended::upstream_reset : telemetry::Ended::upstream_close;
}

template <class Client, class Upstream>
asio::awaitable<bool> exchange(Session& s, Client& client, Upstream& upstream,
                               http::RequestHead& head, const policy::Host& host,
                               std::uint16_t port, const std::string& authority,
                               const policy::Decision* decision,
                               const std::vector<std::string>* secret_forms, RequestBody* rb);

// An HTTP/1.1 request's body read whole before the request goes on (BodyReader): read with the
// head's parser, then put back in front of what the client sent next, with a head framed by
// its length (Content-Length; no Transfer-Encoding), so the exchange relays it as any body.
class WholeH1Body final : public BodyReader {
 public:
  WholeH1Body(Session& s, http::RequestHead& head, ProxiedRequest& r) : s_(s), head_(head), r_(r) {}

  asio::awaitable<WholeBody> read_whole(std::size_t limit) override {
    if (head_.parser->is_done()) co_return WholeBody{};
    // The head was parsed already: a length over the bound is refused here, as Beast checks
    // body_limit against Content-Length only while it parses a head (chunks as they come).
    // Such a client is not told to go on: it waits for the refusal instead of sending.
    const auto length = head_.parser->content_length();
    const bool too_large = length && *length > limit;
    // The client that waits to be told to send it is told now (and not again by the exchange).
    if (!too_large &&
        iequals_ascii(http::first_value(head_.msg(), bhttp::field::expect), "100-continue")) {
      head_.msg().erase(bhttp::field::expect);
      if (head_.msg().version() == 11 &&
          co_await s_.write_client("HTTP/1.1 100 Continue\r\n\r\n")) {
        co_return WholeBody{{}, Errc::malformed_request};
      }
    }
    bhttp::request_parser<bhttp::string_body> p(std::move(*head_.parser));
    p.body_limit(limit);
    boost::system::error_code ec = bhttp::error::body_limit;
    if (!too_large) ec = co_await read_rest(p);
    auto& msg = p.get();
    body_ = std::move(msg.body());
    msg.chunked(false);
    msg.content_length(body_.size());
    // A head the exchange can read on from; r.fields points into it from here on.
    head_.parser = std::make_unique<http::RequestHead::Parser>();
    head_.parser->body_limit(boost::none);
    boost::system::error_code put_ec;
    const std::string text = http::head_text(msg.base());
    head_.parser->put(asio::buffer(text), put_ec);
    r_.fields = &head_.msg().base();
    head_.chunked = false;
    head_.content_length = body_.size();
    head_.has_body = !body_.empty();
    if (ec) {
      co_return WholeBody{
          {},
          ec == bhttp::error::body_limit ? Errc::request_body_too_large : Errc::malformed_request};
    }
    // The body goes back in front of any bytes the client sent after it.
    std::string rest(static_cast<const char*>(s_.buffer.data().data()), s_.buffer.size());
    s_.buffer.consume(s_.buffer.size());
    const std::size_t size = body_.size() + rest.size();
    auto* into = static_cast<char*>(s_.buffer.prepare(size).data());
    std::memcpy(into, body_.data(), body_.size());
    std::memcpy(into + body_.size(), rest.data(), rest.size());
    s_.buffer.commit(size);
    co_return WholeBody{body_};
  }

 private:
  asio::awaitable<boost::system::error_code> read_rest(
      bhttp::request_parser<bhttp::string_body>& p) {
    boost::system::error_code ec;
    while (!ec && !p.is_done()) {
      s_.watchdog->arm(s_.limits().idle_timeout);
      if (s_.tls) {
        ec = co_await read_some_into(s_.tls->stream, s_.buffer, p);
      } else {
        ec = co_await read_some_into(s_.client, s_.buffer, p);
      }
    }
    co_return ec;
  }

  Session& s_;
  http::RequestHead& head_;
  ProxiedRequest& r_;
  std::string body_;
};

}  // namespace

UpstreamFault upstream_fault(const Session& s, const boost::system::error_code& ec,
                             std::string_view method) {
  using telemetry::Ended;
  UpstreamFault out;
  out.ended = ended_by(s, false, ec);
  if (out.ended == Ended::timeout) {
    out.code = Errc::upstream_timeout;
  } else if (out.ended == Ended::malformed) {
    out.code = Errc::upstream_protocol_error;
  } else {
    out.retryable = http::idempotent_method(method);
    out.message = ec == h2::Error::stream_reset
                      ? "the destination reset the stream before it answered"
                      : "the destination closed the connection before it answered";
  }
  return out;
}

bool upstream_reusable(UpstreamConn& up) {
  if (up.buffer.size() != 0) return false;
  char byte;
  const ssize_t n = ::recv(up.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
  return n > 0 && up.tls != nullptr;
}

std::string forwarded_target(const Session& s, const policy::Host& host, std::uint16_t port,
                             std::string_view target) {
  if (s.snap->policy->inspects(s.sandbox, host, port)) {
    const policy::CanonicalPath canonical = policy::canonicalize_path(target);
    if (!canonical.ambiguous && canonical.path != "*") {
      return canonical.path + (canonical.has_query ? "?" + std::string(canonical.query) : "");
    }
  }
  return std::string(target);
}

// Sandgate's own TLS to the intercepted name over the dialled socket: SNI and the verified
// name are the host (or its address for a literal). Errc::ok, or upstream_tls_failed with the
// reason in `why`; upstream_timeout when the watchdog ended it.
asio::awaitable<Errc> upstream_tls(Session& s, UpstreamConn& up, const policy::Host& host,
                                   std::string& why, bool offer_h2) {
  auto& interception = *s.deps.shared->interception;
  boost::system::error_code ec_port;
  const auto peer = up.socket.remote_endpoint(ec_port);
  std::string key = host.display() + ":" + std::to_string(ec_port ? 0 : peer.port());
  up.tls = std::make_unique<UpstreamTlsLeg>(up.socket, interception.upstream, key);
  SSL* ssl = up.tls->stream.native_handle();
  if (SSL_SESSION* session = interception.session_for(key)) {
    SSL_set_session(ssl, session);  // a resumption when the destination still accepts it
    SSL_SESSION_free(session);
  }
  if (offer_h2) {
    static constexpr unsigned char kH2First[] = {2,   'h', '2', 8,   'h', 't',
                                                 't', 'p', '/', '1', '.', '1'};
    SSL_set_alpn_protos(ssl, kH2First, sizeof kH2First);
  }
  if (host.is_address()) {
    const std::string ip = host.address.to_string();
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.name.c_str());
    SSL_set1_host(ssl, host.name.c_str());
  }
  s.watchdog->arm(s.limits().connect_timeout);
  auto [ec] = co_await up.tls->stream.async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (!ec) co_return Errc::ok;
  if (s.watchdog->expired()) co_return Errc::upstream_timeout;
  s.deps.shared->metrics->interception_tls_failure(Side::upstream);
  const long verify = SSL_get_verify_result(ssl);
  why = verify != X509_V_OK ? std::string("certificate: ") + X509_verify_cert_error_string(verify)
                            : ec.message();
  co_return Errc::upstream_tls_failed;
}

asio::awaitable<bool> forward_request(Session& s, http::RequestHead& head, std::uint16_t port) {
  // HTTP/1.0 inside an intercepted stream may name no host: it addresses the intercepted one.
  const policy::Host host =
      head.host.empty() && s.intercepted ? *s.intercepted : policy::normalize_host(head.host);
  const std::string method(head.msg().method_string());
  ProxiedRequest request;
  request.method = method;
  request.scheme = "http";
  request.host = &host;
  request.port = port;
  if (s.intercepted) {
    // Inside the TLS sandgate terminated: the request names its authority (Host, or an
    // absolute URL), on the intercepted port unless it says another one.
    request.scheme = "https";
    request.intercepted = &*s.intercepted;
    request.intercepted_port = s.intercepted_port;
    const auto written = policy::parse_authority(http::first_value(head.msg(), bhttp::field::host));
    request.port = written && written->port ? *written->port : s.intercepted_port;
    if (head.form == http::RequestHead::Form::absolute) request.port = head.port;
  }
  request.path = head.path_and_query;
  request.fields = &head.msg().base();
  request.connect_to_origin = head.form == http::RequestHead::Form::authority;
  std::string authority;
  std::optional<WholeH1Body> whole;
  if (s.intercepted) {
    authority = upstream_authority(s, host, request.port);
    request.authority = authority;
    request.body = &whole.emplace(s, head, request);
  }
  // Every line about this request names it (Session::record), until it is over.
  s.request_method = method;
  s.request_path = head.path_and_query;
  struct Forget {
    Session& s;
    ~Forget() {
      s.request_method = s.request_path = {};
      s.request_credential = s.request_fingerprint = {};
      s.request_endpoint_status = 0;
      s.request_endpoint_error = {};
    }
  } forget{s};
  const ChainResult result = co_await filter_request(s, request);
  s.request_credential = request.credential;  // also a 503's: which credential was wanted
  if (!result.allowed) {
    const std::string shown = host.display();
    if (result.error != Errc::ok) {
      s.request_endpoint_status = result.endpoint_status;
      s.request_endpoint_error = result.endpoint_error;
      co_await s.fail(policy::EntryMode::http, result.error, shown, request.port, result.message,
                      telemetry::Phase::unset, nullptr, result.retryable);
      // A body left unread (one over the bound a filter reads whole) may still be arriving:
      // the client is let read the answer before the close.
      if (!head.parser->is_done()) co_await linger_close(s);
    } else {
      co_await s.deny(policy::EntryMode::http, shown, request.port, result.decision, &host);
    }
    co_return false;
  }
  std::string target = forwarded_target(s, host, request.port, head.path_and_query);
  head.path_and_query = std::move(target);
  s.request_path = head.path_and_query;
  if (request.token != nullptr) s.request_fingerprint = request.token->fingerprint;
  // The body is scanned for placeholders on its way out, like the head was (a request with
  // no body never needs it).
  // On the heap, like other rare state here: this frame stays small enough for Asio's
  // per-thread cache to recycle.
  std::unique_ptr<RequestBody> body;
  if (!head.parser->is_done()) {
    body = std::make_unique<RequestBody>();
    body->scan(s, host, request.port, request.intercepted != nullptr);
    if (request.resign_chunks) body->resign(std::move(request.resign_chunks));
    if (body->idle()) body.reset();
  }
  co_return co_await handle_http(s, head, host, request.port, &result.decision,
                                 &request.secret_forms, body.get());
}

asio::awaitable<void> linger_close(Session& s) {
  using namespace asio::experimental::awaitable_operators;
  tcp::socket& socket = s.client;
  // close_notify first when intercepted (its write bounded by close_client_tls's deadline),
  // then the FIN; what the client sends is drained meanwhile, so that a client blocked on
  // its own sends (it reads nothing until they went) never holds up either.
  const auto shut = [](Session& session) -> asio::awaitable<void> {
    co_await close_client_tls(session);
    boost::system::error_code ignored;
    session.client.shutdown(tcp::socket::shutdown_send, ignored);
  };
  const auto drain = [](tcp::socket& from) -> asio::awaitable<void> {
    std::vector<char> buf(kBodyChunk);
    for (std::size_t total = 0; total < kLingerBytes;) {
      auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), use_tuple);
      if (ec) co_return;
      total += n;
    }
  };
  asio::steady_timer timer(socket.get_executor(), kLingerTime);
  co_await ((shut(s) && drain(socket)) || timer.async_wait(use_tuple));
}

std::string upstream_authority(const Session& s, const policy::Host& host, std::uint16_t port) {
  const std::uint16_t default_port = s.tls ? 443 : 80;
  return host.display() + (port == default_port ? "" : ":" + std::to_string(port));
}

asio::awaitable<bool> handle_http(Session& s, http::RequestHead& head, const policy::Host& host,
                                  std::uint16_t port, const policy::Decision* decision,
                                  const std::vector<std::string>* secret_forms, RequestBody* rb) {
  const std::string authority = upstream_authority(s, host, port);

  // One upstream connection per authority: a kept-alive connection is reused only for the
  // same host and port, and only after this request was decided on its own. An intercepted
  // one for another authority goes back to the worker's pool; one may come from there.
  if (s.upstream && s.upstream->authority != authority) {
    s.deps.upstreams->put(s, std::move(s.upstream));
  }
  if (s.upstream && !upstream_reusable(*s.upstream)) s.upstream.reset();
  if (!s.upstream && s.tls) s.upstream = s.deps.upstreams->take(s, authority);
  if (!s.upstream) {
    Dialed dialed = co_await s.dial(host, port);
    if (dialed.error == Errc::network_denied) {
      const std::string shown = host.display();
      co_await s.deny(policy::EntryMode::http, shown, port, dialed.denial, &dialed.denied_host);
      co_return false;
    }
    if (dialed.error != Errc::ok) {
      const std::string shown = host.display();
      co_await s.fail(policy::EntryMode::http, dialed.error, shown, port, {},
                      telemetry::Phase::connect);
      co_return false;
    }
    s.upstream =
        std::make_unique<UpstreamConn>(std::move(dialed.socket), authority, dialed.address);
    if (s.tls) {
      std::string why;
      if (const Errc e = co_await upstream_tls(s, *s.upstream, host, why, false); e != Errc::ok) {
        const std::string shown = host.display();
        s.upstream.reset();
        s.watchdog->arm(s.limits().header_timeout);
        co_await s.fail(policy::EntryMode::http, e, shown, port, why, telemetry::Phase::connect);
        co_return false;
      }
    }
  }
  if (s.tls)
    co_return co_await exchange(s, s.tls->stream, s.upstream->tls->stream, head, host, port,
                                authority, decision, secret_forms, rb);
  co_return co_await exchange(s, s.client, s.upstream->socket, head, host, port, authority,
                              decision, secret_forms, rb);
}

namespace {

// One request and its response between the client and the upstream connection in
// s.upstream (both plain, or both TLS when intercepted).
template <class Client, class Upstream>
asio::awaitable<bool> exchange(Session& s, Client& client, Upstream& upstream,
                               http::RequestHead& head, const policy::Host& host,
                               std::uint16_t port, const std::string& authority,
                               const policy::Decision* decision,
                               const std::vector<std::string>* secret_forms, RequestBody* rb) {
  auto& shared = *s.deps.shared;
  UpstreamConn& up = *s.upstream;
  up.idle = false;

  // The request: the validated head's own parser reads on into the body (the head is not
  // parsed again), and the head is edited for upstream.
  s.watchdog->arm(s.limits().idle_timeout);
  bhttp::request_parser<bhttp::buffer_body> req_parser(std::move(*head.parser));
  auto& req = req_parser.get();
  // What the validated head says, not what Beast makes of it: keep-alive from every
  // Connection field, and the origin-form target ("/" in front of a bare query too).
  const bool client_keep_alive = head.keep_alive;
  const unsigned client_version = req.version();
  const std::string method(req.method_string());
  req.target(head.path_and_query);
  const std::string& origin_target = head.path_and_query;
  const std::string_view path_only =
      std::string_view(origin_target).substr(0, origin_target.find('?'));
  const bool expect_continue =
      iequals_ascii(http::first_value(req, bhttp::field::expect), "100-continue");
  const bool request_chunked = req.chunked();
  // A WebSocket upgrade inside an intercepted stream is decided like any request and, once
  // the destination agrees (101), relayed as the new protocol. Any other upgrade (h2c above
  // all: a second protocol the filters would not see) never reaches the destination.
  const bool websocket = s.tls && head.upgrade && client_version == 11 &&
                         iequals_ascii(http::first_value(req, bhttp::field::upgrade), "websocket");
  http::strip_hop_by_hop(req.base());
  // A plain upstream connection never outlives its client's (only intercepted ones are pooled),
  // so when the client's ends with this exchange, the destination is told so: it then sends
  // its FIN with the response, rather than waiting for sandgate's close.
  constexpr bool plain_client = std::is_same_v<Client, tcp::socket>;
  if (plain_client && !client_keep_alive) req.set(bhttp::field::connection, "close");
  req.erase(bhttp::field::expect);
  req.set(bhttp::field::host, authority);
  req.version(11);
  if (request_chunked) req.chunked(true);
  if (websocket) {
    req.set(bhttp::field::upgrade, "websocket");
    req.set(bhttp::field::connection, "Upgrade");
  }

  // A response from a host a credential is bound to is scanned for the token on its way back
  // (secret_forms: the injected token's, or those cached for the host): its header fields by
  // `redactor`, its body by a `scrubber` that first undoes its content codings.
  std::optional<secrets::Redactor> redactor;
  std::optional<secrets::ResponseScrubber> scrubber;
  if (secret_forms != nullptr && !secret_forms->empty()) redactor.emplace(*secret_forms);
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  int status = 0;
  const std::string shown = host.display();
  // The one audit line of the exchange, and its metrics, however it ends. `code`: ok for an
  // "http_request" line (a success when completed), else the error the line is about.
  const auto report = [&](Errc code, std::string_view reason, telemetry::Ended ended,
                          telemetry::Phase phase) {
    const std::string dialed_ip = up.address.to_string();
    const bool completed = code == Errc::ok && ended == telemetry::Ended::completed;
    telemetry::AuditRecord r = s.record(policy::EntryMode::http);
    r.event = code == Errc::ok ? std::string_view("http_request") : code_name(code);
    r.outcome = completed ? "success" : "failure";
    r.reason = reason;
    r.host = shown;
    r.port = port;
    r.destination_ip = dialed_ip;
    r.method = method;
    r.url_path = path_only;
    if (decision != nullptr) {
      r.rule = decision->rule;
      // Let through by an audit-mode rule: the line says what enforcing it would refuse.
      if (decision->audit) r.would_deny = policy::reason_name(decision->reason);
    }
    r.tls_sni = s.client_sni();
    r.http_version = client_version == 10 ? "1.0" : "1.1";
    r.duration = std::chrono::steady_clock::now() - started;
    r.http_status = status;
    r.bytes_up = bytes_up;
    r.bytes_down = bytes_down;
    if (redactor) r.redactions = redactor->redactions();
    if (scrubber) r.redactions += scrubber->redactions();
    r.ended = ended;
    r.phase = completed ? telemetry::Phase::unset : phase;
    shared.audit->write(r);
    if (code != Errc::ok) shared.metrics->error(code);
    shared.metrics->request(s.tls ? telemetry::Mode::https : telemetry::Mode::http,
                            completed ? telemetry::Outcome::allowed : telemetry::Outcome::error);
    shared.metrics->bytes(telemetry::Direction::upstream, bytes_up);
    shared.metrics->bytes(telemetry::Direction::downstream, bytes_down);
  };
  // Ends the exchange before any response byte went to the client: the line, then the error
  // response when the client is still there to read it.
  const auto refuse_now = [&](Errc code, std::string_view reason, telemetry::Ended ended,
                              telemetry::Phase phase, std::string_view message = {},
                              std::optional<bool> retryable = {}) {
    status = static_cast<int>(http_status(code));
    report(code, reason, ended, phase);
    s.upstream.reset();
    ErrorInfo info;
    info.code = code;
    info.sandbox = s.sandbox;
    info.host = shown;
    info.port = port;
    info.message = message;
    info.retryable = retryable;
    return error_response(info);
  };

  if (expect_continue && client_version == 11 && !req_parser.is_done()) {
    if (co_await s.write_client("HTTP/1.1 100 Continue\r\n\r\n")) co_return false;
  }
  if (const Relayed e =
          co_await relay_message(client, s.buffer, req_parser, upstream, bytes_up, s, false, rb);
      e.side == Relayed::Side::tripped) {
    // A placeholder in the body, going where it may not: the destination's connection is
    // reset (it never sees the request end, nor the bytes that held the placeholder), the
    // client told as for one in a header, and the connection closed (its body unread).
    boost::system::error_code ignored;
    up.socket.set_option(asio::socket_base::linger(true, 0), ignored);
    s.upstream.reset();
    const policy::Decision d = policy::placeholder_denial(rb->tripwire()->check().credential);
    s.watchdog->arm(s.limits().header_timeout);
    co_await s.deny(policy::EntryMode::http, shown, port, d, &host);
    co_await linger_close(s);  // the client may still be sending: let it read the 403
    co_return false;
  } else if (e.side == Relayed::Side::unsignable) {
    // The destination saw part of an upload it must not see end: reset, as for a tripwire.
    boost::system::error_code ignored;
    up.socket.set_option(asio::socket_base::linger(true, 0), ignored);
    const std::string response = refuse_now(
        Errc::signature_not_resignable, {}, telemetry::Ended::malformed, telemetry::Phase::request,
        "the upload's chunks cannot be signed again: " + std::string(rb->why()), false);
    s.watchdog->arm(s.limits().header_timeout);
    co_await s.write_client(response);
    co_await linger_close(s);
    co_return false;
  } else if (!e.ok()) {
    // Part of the request may have reached the destination: the line says how much.
    const bool client_side = e.side == Relayed::Side::in;
    const telemetry::Ended ended = ended_by(s, client_side, e.ec);
    using telemetry::Ended;
    if (ended == Ended::malformed && client_side) {
      // A body sandgate cannot frame: the client is told (400).
      const std::string response = refuse_now(Errc::malformed_request, "request_truncated", ended,
                                              telemetry::Phase::request);
      s.watchdog->arm(s.limits().header_timeout);
      co_await s.write_client(response);
    } else if (!client_side && ended != Ended::shutdown) {
      // The destination broke off while it took the request.
      const UpstreamFault f = upstream_fault(s, e.ec, method);
      const std::string response = refuse_now(f.code, "request_truncated", f.ended,
                                              telemetry::Phase::request, f.message, f.retryable);
      s.watchdog->arm(s.limits().header_timeout);
      co_await s.write_client(response);
    } else {
      report(Errc::ok, "request_truncated", ended, telemetry::Phase::request);
      s.upstream.reset();
      s.client_cut = true;
    }
    co_return false;
  }

  // The response: skip interim 1xx (forwarded as they come), then stream the final one.
  bool upstream_keep_alive = false;
  bool keep_alive = client_keep_alive;
  for (;;) {
    // The response's fields live in `arena` (no malloc per field); it outlives the parser.
    http::ResponseArena arena;
    using Allocator = http::ArenaFields::allocator_type;
    bhttp::response_parser<bhttp::buffer_body, Allocator> res_parser(
        std::piecewise_construct, std::make_tuple(), std::make_tuple(Allocator(arena)));
    res_parser.header_limit(static_cast<std::uint32_t>(s.limits().max_header_bytes));
    res_parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (method == "HEAD") res_parser.skip(true);
    if (const auto ec = co_await read_header_into(upstream, up.buffer, res_parser)) {
      const UpstreamFault f = upstream_fault(s, ec, method);
      if (f.ended == telemetry::Ended::shutdown) {
        report(Errc::ok, {}, f.ended, telemetry::Phase::headers);
        co_return false;
      }
      const std::string response =
          refuse_now(f.code, {}, f.ended, telemetry::Phase::headers, f.message, f.retryable);
      s.watchdog->arm(s.limits().header_timeout);
      co_await s.write_client(response);
      co_return false;
    }
    auto& res = res_parser.get();
    status = static_cast<int>(res.result_int());
    if (redactor) redact_fields(*redactor, res.base());
    if (status == 101 && websocket) {
      // The destination switched: its head goes to the client, then bytes both ways until
      // either side ends (the exchange's one line then counts them).
      res.version(11);
      if (const Relayed e =
              co_await relay_message(upstream, up.buffer, res_parser, client, bytes_down, s, false);
          !e.ok()) {
        report(Errc::ok, "response_truncated", ended_by(s, e.side == Relayed::Side::out, e.ec),
               telemetry::Phase::headers);
        s.upstream.reset();
        s.client_cut = true;
        co_return false;
      }
      const telemetry::Ended ended =
          co_await relay_upgraded(s, client, s.buffer, upstream, up.buffer, bytes_up, bytes_down);
      report(Errc::ok, {}, ended, telemetry::Phase::body);
      s.upstream.reset();
      // Either side's close ends the upgraded stream cleanly (its own protocol says whether
      // it was whole); a reset is passed on as a cut.
      s.client_cut =
          ended == telemetry::Ended::client_reset || ended == telemetry::Ended::upstream_reset;
      co_return false;
    }
    if (status == 101) {
      const std::string response =
          refuse_now(Errc::upstream_protocol_error, {}, telemetry::Ended::upstream_close,
                     telemetry::Phase::headers,
                     "the destination switched protocols without an Upgrade request");
      s.watchdog->arm(s.limits().header_timeout);
      co_await s.write_client(response);
      co_return false;
    }
    const bool interim = status >= 100 && status < 200;
    const bool eof_delimited =
        !interim && !res_parser.is_done() && !res_parser.content_length() && !res.chunked();
    const bool was_chunked = res.chunked();
    // A body the sandbox may read the token in is decoded to be scanned, and passed on decoded;
    // one in a coding sandgate cannot decode is refused.
    bool decoded = false;
    if (redactor && !interim && !res_parser.is_done()) {
      std::vector<std::string_view> encodings;
      for (const auto& f : res.base()) {
        if (f.name() == bhttp::field::content_encoding) encodings.push_back(f.value());
      }
      std::optional<std::vector<secrets::Coding>> codings =
          secrets::parse_content_codings(encodings);
      if (!codings) {
        const std::string response =
            refuse_now(Errc::upstream_encoding_unsupported, "response_not_decodable",
                       telemetry::Ended::upstream_close, telemetry::Phase::headers,
                       "the destination's response is in a Content-Encoding sandgate cannot "
                       "decode to scan it for the credential");
        s.watchdog->arm(s.limits().header_timeout);
        co_await s.write_client(response);
        co_return false;
      }
      decoded = !codings->empty();
      scrubber.emplace(*secret_forms, std::move(*codings));
      if (decoded) {
        res.erase(bhttp::field::content_encoding);
        res.erase(bhttp::field::content_length);
        if (const auto etag = res.find(bhttp::field::etag); etag != res.end()) {
          res.set(bhttp::field::etag, secrets::weakened_etag(etag->value()));
        }
      }
    }
    http::strip_hop_by_hop(res.base());
    if (was_chunked || eof_delimited || decoded) {
      if (client_version == 11) {
        res.chunked(true);  // re-frame an EOF-delimited body so the client may keep alive
      } else {
        res.chunked(false);  // HTTP/1.0 knows no chunking: the body ends with the close
        keep_alive = false;
      }
    }
    if (!interim) res.keep_alive(keep_alive);
    const bool last = !interim && !keep_alive && plain_client;
    const Relayed e = scrubber ? co_await relay_scrubbed(upstream, up.buffer, res_parser, client,
                                                         bytes_down, s, *scrubber)
                               : co_await relay_message(upstream, up.buffer, res_parser, client,
                                                        bytes_down, s, last);
    if (e.side == Relayed::Side::undecodable) {
      // The head (and what decoded of the body) went out: the client sees the message cut
      // off (no last chunk; a reset where only the close would end it).
      report(Errc::upstream_encoding_unsupported, "response_not_decodable",
             telemetry::Ended::upstream_close, telemetry::Phase::body);
      s.upstream.reset();
      s.client_cut = true;
      if (!res.chunked()) s.reset_client();
      co_return false;
    }
    if (!e.ok()) {
      // The head is already on its way: all that is left is to close, so the client sees a
      // truncated message, and to say in the audit line who broke off.
      const bool upstream_side = e.side == Relayed::Side::in;
      const telemetry::Ended ended = ended_by(s, !upstream_side, e.ec);
      const bool upstream_fault = upstream_side && ended != telemetry::Ended::shutdown;
      report(upstream_fault ? Errc::upstream_protocol_error : Errc::ok, "response_truncated", ended,
             telemetry::Phase::body);
      s.upstream.reset();
      s.client_cut = true;
      co_return false;
    }
    if (!interim) {
      upstream_keep_alive = res_parser.keep_alive() && !eof_delimited;
      break;
    }
  }
  report(Errc::ok, {}, telemetry::Ended::completed, telemetry::Phase::body);
  if (!keep_alive && plain_client) {
    // The FIN goes now, with what MSG_MORE held back (relay_message's `last`).
    boost::system::error_code ignored;
    s.client.shutdown(tcp::socket::shutdown_send, ignored);
    s.client_send_shut = !ignored;
  }
  if (!upstream_keep_alive) s.upstream.reset();
  if (s.upstream) s.upstream->idle = true;
  co_return keep_alive;
}

}  // namespace

}  // namespace sandgate::proxy
