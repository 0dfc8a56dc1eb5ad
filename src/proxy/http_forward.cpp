// Absolute-form http:// forwarding: one request and its response, bodies streamed through a
// fixed buffer in both directions (never buffered whole), hop-by-hop headers removed.
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <memory>

#include "common/ascii.hpp"
#include "http/request_head.hpp"
#include "proxy/session.hpp"
#include "proxy/upstream.hpp"

namespace sandgate::proxy {

namespace {

namespace bhttp = boost::beast::http;
constexpr std::size_t kBodyChunk = 16 * 1024;

enum class RelayError { none, read, write };

// Streams one message from `in` to `out`: the (already edited) header, then the body
// through a fixed buffer as bytes arrive (server-sent events, streamed responses),
// re-framed as the header says. Every transfer pushes the idle deadline forward.
template <bool isRequest>
asio::awaitable<RelayError> relay_message(tcp::socket& in, boost::beast::flat_buffer& in_buffer,
                                          bhttp::parser<isRequest, bhttp::buffer_body>& p,
                                          tcp::socket& out, std::uint64_t& bytes, Session& s) {
  const auto idle = s.limits().idle_timeout;
  bhttp::serializer<isRequest, bhttp::buffer_body> sr{p.get()};
  // The header goes out at once when no body bytes are at hand yet (a streamed response must
  // not wait for its first chunk); otherwise it goes out together with them, in one write.
  if (!p.is_done() && in_buffer.size() == 0) {
    p.get().body().data = nullptr;
    p.get().body().size = 0;
    p.get().body().more = true;
    auto [ec, n] = co_await bhttp::async_write_header(out, sr, use_tuple);
    if (ec) co_return RelayError::write;
    bytes += n;
    s.watchdog->arm(idle);
  }
  std::unique_ptr<char[]> chunk;  // only for a message with a body, and not zeroed
  do {
    if (!p.is_done()) {
      if (!chunk) chunk = std::make_unique_for_overwrite<char[]>(kBodyChunk);
      p.get().body().data = chunk.get();
      p.get().body().size = kBodyChunk;
      auto [ec, n] = co_await bhttp::async_read_some(in, in_buffer, p, use_tuple);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return RelayError::read;
      p.get().body().size = kBodyChunk - p.get().body().size;
      // An empty buffer would be serialized as an empty chunk, which is the last-chunk marker.
      p.get().body().data = p.get().body().size > 0 ? chunk.get() : nullptr;
      p.get().body().more = !p.is_done();
      s.watchdog->arm(idle);
    } else {
      p.get().body().data = nullptr;
      p.get().body().size = 0;
      p.get().body().more = false;
    }
    auto [ec, n] = co_await bhttp::async_write(out, sr, use_tuple);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) co_return RelayError::write;
    bytes += n;
    s.watchdog->arm(idle);
  } while (!sr.is_done());
  co_return RelayError::none;
}

// True when a kept-alive upstream connection still looks usable (not closed by the server,
// no stray bytes waiting).
bool upstream_reusable(UpstreamConn& up) {
  char byte;
  const ssize_t n = ::recv(up.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && up.buffer.size() == 0;
}

}  // namespace

asio::awaitable<bool> handle_http(Session& s, const http::RequestHead& head,
                                  const policy::Host& host, std::uint16_t port) {
  auto& shared = *s.deps.shared;
  const std::string authority = host.display() + (port == 80 ? "" : ":" + std::to_string(port));

  // One upstream connection per authority: a kept-alive connection is reused only for the
  // same host and port, and only after this request was decided on its own.
  if (s.upstream && (s.upstream->authority != authority || !upstream_reusable(*s.upstream))) {
    s.upstream.reset();
  }
  if (!s.upstream) {
    Dialed dialed = co_await s.dial(host, port);
    if (dialed.error == Errc::network_denied) {
      co_await s.deny(policy::EntryMode::http, host, port, dialed.denial, &dialed.denied_host);
      co_return false;
    }
    if (dialed.error != Errc::ok) {
      co_await s.fail(policy::EntryMode::http, dialed.error, host.display(), port);
      co_return false;
    }
    s.upstream.emplace(std::move(dialed.socket), authority, dialed.address);
  }
  UpstreamConn& up = *s.upstream;

  // The request: parsed again by Beast from the validated head, then edited for upstream.
  s.watchdog->arm(s.limits().idle_timeout);
  bhttp::request_parser<bhttp::buffer_body> req_parser;
  req_parser.header_limit(static_cast<std::uint32_t>(s.limits().max_header_bytes));
  req_parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (auto [ec, n] = co_await bhttp::async_read_header(s.client, s.buffer, req_parser, use_tuple);
      ec) {
    co_return false;
  }
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
  const bool expect_continue = iequals_ascii(req[bhttp::field::expect], "100-continue");
  const bool request_chunked = req.chunked();
  http::strip_hop_by_hop(req.base());
  req.erase(bhttp::field::expect);
  req.set(bhttp::field::host, authority);
  req.version(11);
  if (request_chunked) req.chunked(true);

  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  if (expect_continue && client_version == 11 && !req_parser.is_done()) {
    if (co_await s.write_client("HTTP/1.1 100 Continue\r\n\r\n")) co_return false;
  }
  if (const RelayError e =
          co_await relay_message(s.client, s.buffer, req_parser, up.socket, bytes_up, s);
      e != RelayError::none) {
    if (e == RelayError::write) {
      co_await s.fail(
          policy::EntryMode::http,
          s.watchdog->expired() ? Errc::upstream_timeout : Errc::upstream_connect_failed,
          host.display(), port);
    }
    co_return false;
  }

  // The response: skip interim 1xx (forwarded as they come), then stream the final one.
  int status = 0;
  bool upstream_keep_alive = false;
  bool keep_alive = client_keep_alive;
  // One audit line for the exchange, finished (event "http_request") or broken off.
  auto audit_exchange = [&](std::string_view event, std::string_view reason) {
    const std::string shown = host.display();
    const std::string dialed_ip = up.address.to_string();
    telemetry::AuditRecord r = s.record(policy::EntryMode::http);
    r.event = event;
    r.outcome = reason.empty() ? "success" : "failure";
    r.reason = reason;
    r.host = shown;
    r.port = port;
    r.destination_ip = dialed_ip;
    r.method = method;
    r.url_path = path_only;
    r.http_status = status;
    r.bytes_up = bytes_up;
    r.bytes_down = bytes_down;
    shared.audit->write(r);
  };
  for (;;) {
    bhttp::response_parser<bhttp::buffer_body> res_parser;
    res_parser.header_limit(static_cast<std::uint32_t>(s.limits().max_header_bytes));
    res_parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (method == "HEAD") res_parser.skip(true);
    auto [ec, n] = co_await bhttp::async_read_header(up.socket, up.buffer, res_parser, use_tuple);
    if (ec) {
      const Errc code = s.watchdog->expired() ? Errc::upstream_timeout
                        : (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
                           ec == asio::error::connection_reset)
                            ? Errc::upstream_connect_failed
                            : Errc::upstream_protocol_error;
      s.upstream.reset();
      co_await s.fail(policy::EntryMode::http, code, host.display(), port);
      co_return false;
    }
    auto& res = res_parser.get();
    status = static_cast<int>(res.result_int());
    if (status == 101) {
      s.upstream.reset();
      co_await s.fail(policy::EntryMode::http, Errc::upstream_protocol_error, host.display(), port,
                      "the destination switched protocols without an Upgrade request");
      co_return false;
    }
    const bool interim = status >= 100 && status < 200;
    const bool eof_delimited =
        !interim && !res_parser.is_done() && !res.has_content_length() && !res.chunked();
    const bool was_chunked = res.chunked();
    http::strip_hop_by_hop(res.base());
    if (was_chunked || eof_delimited) {
      if (client_version == 11) {
        res.chunked(true);  // re-frame an EOF-delimited body so the client may keep alive
      } else {
        res.chunked(false);  // HTTP/1.0 knows no chunking: the body ends with the close
        keep_alive = false;
      }
    }
    if (!interim) res.keep_alive(keep_alive);
    const RelayError e =
        co_await relay_message(up.socket, up.buffer, res_parser, s.client, bytes_down, s);
    if (e != RelayError::none) {
      // The head is already on its way: all that is left is to close, so the client sees a
      // truncated message, and to say so in the audit log when the upstream broke off.
      if (e == RelayError::read) {
        audit_exchange(code_name(Errc::upstream_protocol_error), "response_truncated");
        shared.metrics->error(Errc::upstream_protocol_error);
        shared.metrics->request(telemetry::Mode::http, telemetry::Outcome::error);
      }
      s.upstream.reset();
      co_return false;
    }
    if (!interim) {
      upstream_keep_alive = res_parser.keep_alive() && !eof_delimited;
      break;
    }
  }
  audit_exchange("http_request", {});
  if (!upstream_keep_alive) s.upstream.reset();
  shared.metrics->request(telemetry::Mode::http, telemetry::Outcome::allowed);
  shared.metrics->bytes(telemetry::Direction::upstream, bytes_up);
  shared.metrics->bytes(telemetry::Direction::downstream, bytes_down);
  co_return keep_alive;
}

}  // namespace sandgate::proxy
