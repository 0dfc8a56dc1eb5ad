// The explicit-proxy session: read a request head, authenticate, decide, dispatch to
// CONNECT or HTTP forwarding, and repeat on keep-alive connections.
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <tuple>

#include "http/request_head.hpp"
#include "proxy/auth.hpp"
#include "proxy/send_now.hpp"
#include "proxy/session.hpp"
#include "proxy/tls_streams.hpp"
#include "proxy/upstreams/pool.hpp"

namespace sandgate::proxy {

namespace {

constexpr std::size_t kReadChunk = 4096;

// Reads until s.buffer holds a whole request head. Returns its size, or the error code to
// answer with (Errc::ok with size 0: the client went away or idled out before a byte).
asio::awaitable<std::pair<Errc, std::size_t>> read_head(Session& s, bool first) {
  const http::HeadLimits limits{s.limits().max_request_line_bytes, s.limits().max_header_bytes};
  bool started = s.buffer.size() > 0;
  // A connection that has not authenticated yet gets the shorter of the two deadlines.
  const auto head_deadline = s.sandbox.empty()
                                 ? std::min(s.limits().auth_timeout, s.limits().header_timeout)
                                 : s.limits().header_timeout;
  s.watchdog->arm(first || started ? head_deadline : s.limits().idle_timeout);
  std::size_t scanned = 0;
  std::size_t blank = 0;  // empty lines dropped before the request line
  for (;;) {
    // RFC 9112 2.2: empty lines before a request line are ignored; they count against the
    // head's size bound.
    std::size_t skip = 0;
    while (scanned == 0 && s.buffer.size() >= skip + 2 &&
           std::memcmp(static_cast<const char*>(s.buffer.data().data()) + skip, "\r\n", 2) == 0) {
      skip += 2;
    }
    s.buffer.consume(skip);
    blank += skip;
    if (blank > limits.max_header_bytes) {
      co_return std::pair{Errc::headers_too_large, std::size_t{0}};
    }
    const auto* data = static_cast<const char*>(s.buffer.data().data());
    const std::string_view view(data, s.buffer.size());
    // Re-scan only when a line ended since the last scan (slow-header clients cost little).
    if (view.size() > scanned && std::memchr(data + scanned, '\n', view.size() - scanned)) {
      auto end = http::find_head_end(view, limits);
      if (!end) co_return std::pair{static_cast<Errc>(end.error().value()), std::size_t{0}};
      if (*end > 0) co_return std::pair{Errc::ok, *end};
    } else if (view.size() > limits.max_header_bytes) {
      co_return std::pair{Errc::headers_too_large, std::size_t{0}};
    }
    scanned = view.size();
    boost::system::error_code ec;
    std::size_t n = 0;
    if (s.tls) {
      std::tie(ec, n) =
          co_await s.tls->stream.async_read_some(s.buffer.prepare(kReadChunk), use_tuple);
    } else {
      std::tie(ec, n) = co_await s.client.async_read_some(s.buffer.prepare(kReadChunk), use_tuple);
    }
    s.buffer.commit(n);
    if (ec) {
      if (s.evicted) co_return std::pair{Errc::too_many_connections, std::size_t{0}};
      if (s.watchdog->expired() && (started || first)) {
        co_return std::pair{started ? Errc::header_timeout : Errc::ok, std::size_t{0}};
      }
      co_return std::pair{Errc::ok, std::size_t{0}};
    }
    if (!started && n > 0) {
      started = true;
      s.watchdog->arm(head_deadline);
    }
  }
}

// Reads what the client has sent already, without waiting; true when that is a whole request
// head (or bytes no head can begin with, which read_head answers at once).
bool head_arrived(Session& s) {
  // recv(2) itself: Asio's synchronous read_some would wait for a byte.
  const auto into = s.buffer.prepare(kReadChunk);
  const ssize_t n = ::recv(s.client.native_handle(), into.data(), into.size(), MSG_DONTWAIT);
  if (n <= 0) return false;
  s.buffer.commit(static_cast<std::size_t>(n));
  const auto* data = static_cast<const char*>(s.buffer.data().data());
  const auto end =
      http::find_head_end(std::string_view(data, s.buffer.size()),
                          {s.limits().max_request_line_bytes, s.limits().max_header_bytes});
  return !end || *end > 0;
}

}  // namespace

asio::awaitable<std::optional<http::RequestHead>> next_request(Session& s, bool first) {
  auto& shared = *s.deps.shared;
  s.snap = shared.current();  // limits for reading the head
  const auto [read_error, head_size] = co_await read_head(s, first);
  if (read_error != Errc::ok) {
    co_await s.fail(policy::EntryMode::http, read_error);
    co_return std::nullopt;
  }
  if (head_size == 0) co_return std::nullopt;
  s.snap = shared.current();  // a reload while the connection idled applies to this request

  const http::HeadLimits limits{s.limits().max_request_line_bytes, s.limits().max_header_bytes};
  const auto* data = static_cast<const char*>(s.buffer.data().data());
  auto head = http::parse_request_head(std::string_view(data, head_size), limits);
  if (!head) {
    co_await s.fail(policy::EntryMode::http, static_cast<Errc>(head.error().value()));
    co_return std::nullopt;
  }
  s.buffer.consume(head_size);
  co_return std::move(*head);
}

Errc Session::bind_sandbox(const std::string& id) {
  if (!sandbox.empty()) return sandbox == id ? Errc::ok : Errc::proxy_auth_required;
  sandbox = id;
  auto& connections = deps.shared->connections;
  if (connections.bound.fetch_add(1) >= limits().max_connections) {
    connections.bound.fetch_sub(1);
    return Errc::too_many_connections;
  }
  auto& counter = connections.for_sandbox(id);
  if (counter.fetch_add(1, std::memory_order_relaxed) >= limits().max_connections_per_sandbox) {
    counter.fetch_sub(1, std::memory_order_relaxed);
    connections.bound.fetch_sub(1);
    return Errc::too_many_connections;
  }
  sandbox_connections = &counter;
  pending.release();
  return Errc::ok;
}

Session::Session(tcp::socket s, const tcp::endpoint& peer, WorkerDeps d)
    : client(std::move(s)),
      deps(std::move(d)),
      snap(deps.shared->current()),
      watchdog(std::make_shared<Watchdog>(client.get_executor())),
      client_port(peer.port()),
      client_ip(address_text(peer.address())) {
  // TCP_NODELAY came with the socket from its listener (server.cpp). Non-blocking once, here:
  // Asio's first async operation would set it otherwise, and the relay's splice needs it set
  // in Asio's view too (a second ioctl). Nothing does blocking I/O on the client.
  boost::system::error_code ec;
  client.native_non_blocking(true, ec);
  deps.sessions->live.insert(this);
  watchdog->start([this] {
    boost::system::error_code ignored;
    client.cancel(ignored);
    if (upstream) upstream->socket.cancel(ignored);
    for (tcp::socket* more : more_upstreams) more->cancel(ignored);
  });
  active_connection = deps.shared->metrics->active_connection();
  deps.shared->connections.total.fetch_add(1);
}

Session::~Session() {
  // An intercepted upstream connection idle between responses outlives the client's.
  if (upstream && deps.upstreams) deps.upstreams->put(*this, std::move(upstream));
  deps.shared->connections.total.fetch_sub(1);
  if (sandbox_connections) {
    sandbox_connections->fetch_sub(1, std::memory_order_relaxed);
    deps.shared->connections.bound.fetch_sub(1);
  }
  watchdog->stop();
  boost::system::error_code ignored;
  if (!client_send_shut) client.shutdown(tcp::socket::shutdown_both, ignored);
  client.close(ignored);
  deps.sessions->live.erase(this);
}

void Session::evict() {
  if (!sandbox.empty() || aborted) return;
  evicted = true;
  boost::system::error_code ignored;
  client.cancel(ignored);
}

void Session::abort() {
  aborted = true;
  boost::system::error_code ignored;
  client.close(ignored);
  if (upstream) upstream->socket.close(ignored);
  for (tcp::socket* more : more_upstreams) more->close(ignored);
}

std::vector<std::uint8_t> Session::take_buffer() {
  const auto* data = static_cast<const std::uint8_t*>(buffer.data().data());
  std::vector<std::uint8_t> out(data, data + buffer.size());
  buffer.clear();
  buffer.shrink_to_fit();
  return out;
}

asio::awaitable<boost::system::error_code> Session::write_client(std::string_view bytes) {
  if (tls) {
    auto [ec, n] = co_await asio::async_write(tls->stream, asio::buffer(bytes), use_tuple);
    co_return ec;
  }
  boost::system::error_code ec;
  const std::size_t n = send_now(client, asio::buffer(bytes), ec);
  if (!ec && n < bytes.size()) {
    std::tie(ec, std::ignore) =
        co_await asio::async_write(client, asio::buffer(bytes.substr(n)), use_tuple);
  }
  co_return ec;
}

UpstreamConn::UpstreamConn(tcp::socket s, std::string auth, const policy::IpAddress& a)
    : socket(std::move(s)), authority(std::move(auth)), address(a) {}

UpstreamConn::~UpstreamConn() = default;

namespace {

// An authenticated CONNECT: decided, then refused or opened. A coroutine of its own, so that
// the connection's (serve_explicit's) frame stays small enough for Asio's per-thread cache to
// recycle it.
asio::awaitable<void> serve_connect(Session& s, const http::RequestHead& head) {
  const policy::Host host = policy::normalize_host(head.host);
  policy::StreamFacts facts;
  facts.mode = policy::EntryMode::connect;
  facts.sandbox = &s.sandbox;
  facts.authority = &host;
  facts.port = head.port;
  policy::StreamVerdict v = policy::decide_stream(*s.snap->policy, facts);
  // No rule names it, and the sandbox asks first: decided again once an operator allowed it.
  co_await settle_held_stream(s, facts, v, head.port);
  if (v.action == policy::StreamAction::refuse) {
    co_await s.deny(facts.mode, v.shown, head.port, v.decision, &host);
  } else {
    co_await open_stream(s, v, head.port, {});
  }
}

}  // namespace

asio::awaitable<void> serve_explicit(tcp::socket socket, tcp::endpoint peer, WorkerDeps deps) {
  const auto session = std::make_shared<Session>(std::move(socket), peer, std::move(deps));
  Session& s = *session;
  // A connection that brought its whole request head authenticates at once and never waits in
  // the pending pool. The others take a place there, and are never refused for the silence of
  // others: a full pool ends its oldest instead (PendingSlot).
  if (!head_arrived(s)) {
    s.pending.enter(s.deps.shared->connections, s.client_ip, {session, s.client.get_executor()},
                    pending_cap(s.limits().max_unauthenticated_connections),
                    s.limits().max_unauthenticated_per_source);
  }
  for (bool first = true;; first = false) {
    auto request = co_await next_request(s, first);
    if (!request) co_return;
    http::RequestHead* head = &*request;
    const bool is_connect = head->form == http::RequestHead::Form::authority;
    const auto mode = is_connect ? policy::EntryMode::connect : policy::EntryMode::http;

    // A refusal before forward_request names the plain-HTTP request it refuses (method and
    // path; the audit line drops the query).
    const std::string method(head->msg().method_string());
    if (!is_connect) {
      s.request_method = method;
      s.request_path = head->path_and_query;
    }
    const AuthResult auth = authenticate(
        *s.snap, http::first_value(head->msg(), boost::beast::http::field::proxy_authorization),
        s.sandbox,
        is_connect ? nullptr : &s.auth_memo);  // a CONNECT asks only once
    s.deps.shared->metrics->proxy_auth(auth.outcome);
    if (!auth.ok()) {
      co_await s.refuse_auth(mode, auth, head->host, head->port);
      co_return;
    }
    if (const Errc e = s.bind_sandbox(auth.sandbox); e != Errc::ok) {
      co_await s.fail(mode, e, head->host, head->port);
      co_return;
    }
    if (!is_connect && head->form != http::RequestHead::Form::absolute) {
      co_await s.fail(mode, Errc::unsupported_target, head->host, head->port);
      co_return;
    }
    s.request_method = s.request_path = {};  // forward_request names the request it forwards

    if (is_connect) {
      co_await serve_connect(s, *head);
      co_return;
    }
    if (!co_await forward_request(s, *head, head->port)) co_return;
  }
}

}  // namespace sandgate::proxy
