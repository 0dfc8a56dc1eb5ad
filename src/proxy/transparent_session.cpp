// The transparent session: a connection the launcher's nftables rules redirected here. The
// sandbox is known by its source address; the destination name comes from the connection's
// own first bytes (TLS SNI, HTTP Host) or, for protocols that carry no name, from the
// sandbox's recent DNS answers. The original destination address is only recorded: the name
// is decided, resolved and dialled like any other, on the same decision path.
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <span>

#include "proxy/first_bytes.hpp"
#include "proxy/relay.hpp"
#include "proxy/session.hpp"
#include "proxy/stream_gate.hpp"
#include "proxy/upstream.hpp"

namespace sandgate::proxy {

namespace {

using namespace boost::asio::experimental::awaitable_operators;
constexpr std::size_t kReadChunk = 4096;
// SO_ORIGINAL_DST (linux/netfilter_ipv4.h) and IP6T_SO_ORIGINAL_DST
// (linux/netfilter_ipv6/ip6_tables.h); those headers clash with glibc's <netinet/in.h>.
constexpr int kSoOriginalDst = 80;
constexpr int kIp6tSoOriginalDst = 80;

// The address the sandbox dialled, before nftables redirected it here. A connection that was
// not redirected has no NAT mapping and reports this listener itself, which policy refuses as
// a loop.
tcp::endpoint original_destination(tcp::socket& socket) {
  boost::system::error_code ec;
  const tcp::endpoint local = socket.local_endpoint(ec);
  tcp::endpoint out;
  socklen_t len = static_cast<socklen_t>(out.capacity());
  const bool v6 = local.address().is_v6();
  if (::getsockopt(socket.native_handle(), v6 ? SOL_IPV6 : SOL_IP,
                   v6 ? kIp6tSoOriginalDst : kSoOriginalDst, out.data(), &len) == 0) {
    out.resize(len);
    return out;
  }
  return local;
}

// What the client's first bytes said, or that it sent none in time.
struct Opening {
  FirstBytes first;     // need_more: nothing in time (silent) or the client went away
  bool closed = false;  // the client went away (or the header timeout passed) undecided
};

// Ports where only HTTP and TLS are expected: their first bytes are always waited for (under
// the header timeout) and classified, never given up on after the peek timeout.
bool is_web_port(std::uint16_t port) {
  return port == 80 || port == 443;
}

// Reads the client's first bytes into s.buffer (nothing is consumed) until the classifier
// decides what the connection is. On other ports, a client that sends nothing within
// peek_timeout is left to the server (ssh servers, SMTP, databases speak first): the opening
// is silent, and the bytes that come later are classified by the tunnel's gate before any of
// them is relayed. Once bytes flow, the watchdog's header timeout bounds the rest.
asio::awaitable<Opening> read_opening(Session& s, std::uint16_t port) {
  Opening out;
  bool waited = is_web_port(port);
  for (;;) {
    const auto* data = static_cast<const std::uint8_t*>(s.buffer.data().data());
    out.first = classify_first_bytes(std::span<const std::uint8_t>(data, s.buffer.size()));
    if (out.first.kind != StreamStart::need_more) co_return out;
    if (!waited) {
      waited = true;
      asio::steady_timer timer(s.client.get_executor(), s.limits().peek_timeout);
      const auto first = co_await (s.client.async_wait(tcp::socket::wait_read, use_tuple) ||
                                   timer.async_wait(use_tuple));
      if (first.index() == 1) co_return out;  // silent
      if (std::get<0>(std::get<0>(first))) {
        out.closed = true;
        co_return out;
      }
    }
    auto [ec, n] = co_await s.client.async_read_some(s.buffer.prepare(kReadChunk), use_tuple);
    s.buffer.commit(n);
    if (ec) {
      out.closed = true;
      co_return out;
    }
  }
}

// Closes the client connection with a TCP reset, so it fails at once instead of timing out.
void reset_client(Session& s) {
  boost::system::error_code ignored;
  s.client.set_option(asio::socket_base::linger(true, 0), ignored);
  s.client.close(ignored);
}

// Refuses a stream connection: audit line, then a TLS alert (TLS) or a TCP reset (anything
// else), so the client fails at once instead of timing out.
asio::awaitable<void> refuse_stream(Session& s, policy::EntryMode mode, std::string_view host,
                                    std::uint16_t port, const policy::Decision& d,
                                    std::string_view sni = {}) {
  s.record_denial(mode, host, port, d, sni);
  if (mode == policy::EntryMode::tls) {
    co_await asio::async_write(s.client, asio::buffer(tls_access_denied_alert()), use_tuple);
    co_return;
  }
  reset_client(s);
}

// A failure after an allow (DNS, connect): audit line and metrics, then a reset.
void fail_stream(Session& s, policy::EntryMode mode, Errc code, std::string_view host,
                 std::uint16_t port, telemetry::Phase phase = telemetry::Phase::unset) {
  s.record_failure(mode, code, host, port, 0, phase);
  reset_client(s);
}

// Dials the decided host and relays the connection, starting with the bytes already read.
// `gated`: the client has sent nothing yet (a silent opening), so its first bytes go through
// the stream gate before any of them is relayed.
asio::awaitable<void> tunnel(Session& s, policy::EntryMode mode, const policy::Host& host,
                             std::uint16_t port, std::string_view sni, bool gated = false) {
  auto& shared = *s.deps.shared;
  const std::string shown = host.display();
  Dialed dialed = co_await s.dial(host, port);
  if (dialed.error == Errc::network_denied) {
    co_await refuse_stream(s, mode, shown, port, dialed.denial, sni);
    co_return;
  }
  if (dialed.error != Errc::ok) {
    fail_stream(s, mode, dialed.error, shown, port, telemetry::Phase::connect);
    co_return;
  }
  s.upstream.emplace(std::move(dialed.socket), std::string(), dialed.address);
  tcp::socket& upstream = s.upstream->socket;
  s.active_tunnel = shared.metrics->active_tunnel();

  // The bytes read to classify the connection go first. The relay keeps the session.
  auto gate = gated ? std::make_shared<StreamGate>(s, host, port) : nullptr;
  start_relay(
      s.client, upstream, *s.watchdog, s.limits().idle_timeout, s.take_buffer(), gate.get(),
      [session = s.shared_from_this(), gate, mode, shown, port,
       dialed_ip = dialed.address.to_string(), sni = std::string(sni)](const RelayStats& stats) {
        if (gate == nullptr) {
          session->record_tunnel(mode, shown, port, dialed_ip, stats, sni);
          return;
        }
        const policy::EntryMode seen = gate->sni().empty() ? mode : policy::EntryMode::tls;
        session->record_tunnel(seen, shown, port, dialed_ip, stats, gate->sni(), gate->denial());
      });
}

// HTTP/1 requests, each decided on its own Host and the original port, forwarded like the
// explicit proxy's (so a second request on the connection cannot ride on the first's name).
asio::awaitable<void> serve_http(Session& s, std::uint16_t port) {
  for (bool first = true;; first = false) {
    auto request = co_await next_request(s, first);
    if (!request) co_return;
    http::RequestHead* head = &*request;
    const policy::Host host = policy::normalize_host(head->host);
    policy::Decision d;
    if (head->form == http::RequestHead::Form::authority) {
      d.reason = policy::Reason::nested_proxy;  // CONNECT to whatever listens there
    } else {
      d = s.snap->policy->decide(s.sandbox, host, port, policy::EntryMode::http);
    }
    if (!d.allowed) {
      co_await s.deny(policy::EntryMode::http, host, port, d);
      co_return;
    }
    if (!co_await handle_http(s, *head, host, port)) co_return;
  }
}

}  // namespace

asio::awaitable<void> serve_transparent(tcp::socket socket, WorkerDeps deps) {
  const auto session = std::make_shared<Session>(std::move(socket), std::move(deps));
  Session& s = *session;
  auto& shared = *s.deps.shared;

  const tcp::endpoint original = original_destination(s.client);
  const policy::IpAddress original_ip = to_policy(original.address());
  policy::Host literal;
  literal.kind = policy::Host::Kind::address;
  literal.address = original_ip;
  const std::uint16_t port = original.port();
  // Named, never temporaries in a co_await expression (GCC 12 destroys those twice).
  const std::string literal_shown = literal.display();
  s.original_destination = literal_shown + ":" + std::to_string(port);

  boost::system::error_code ec;
  const auto peer = s.client.remote_endpoint(ec);
  const std::string* sandbox = ec ? nullptr : s.snap->sandbox_for(to_policy(peer.address()));
  if (sandbox == nullptr) {
    policy::Decision d;
    d.reason = policy::Reason::unknown_sandbox;
    co_await refuse_stream(s, policy::EntryMode::tcp, literal_shown, port, d);
    co_return;
  }
  if (!s.pending.held()) {
    fail_stream(s, policy::EntryMode::tcp, Errc::too_many_connections, {}, port);
    co_return;
  }
  if (s.bind_sandbox(*sandbox) != Errc::ok) {
    fail_stream(s, policy::EntryMode::tcp, Errc::too_many_connections, {}, port);
    co_return;
  }

  s.watchdog->arm(s.limits().header_timeout);
  const Opening opening = co_await read_opening(s, port);
  if (opening.closed) co_return;
  s.snap = shared.current();  // decide on the newest policy
  const FirstBytes& first = opening.first;
  const bool silent = first.kind == StreamStart::need_more;
  if (first.kind == StreamStart::http || first.kind == StreamStart::proxy_request) {
    co_await serve_http(s, port);
    co_return;
  }
  const auto mode = first.kind == StreamStart::tls || first.kind == StreamStart::tls_malformed
                        ? policy::EntryMode::tls
                        : policy::EntryMode::tcp;
  if (first.kind == StreamStart::tls_malformed || first.kind == StreamStart::undecidable) {
    policy::Decision d;
    d.reason = first.kind == StreamStart::tls_malformed ? policy::Reason::tls_malformed
                                                        : policy::Reason::unrecognized_protocol;
    co_await refuse_stream(s, mode, literal_shown, port, d);
    co_return;
  }
  if (first.hello.sni) {
    const std::string& sni = *first.hello.sni;
    const policy::Host host = policy::normalize_host(sni);
    const policy::Decision d = s.snap->policy->decide(s.sandbox, host, port, mode);
    if (!d.allowed) {
      const std::string shown = host.is_valid() ? host.display() : sni;
      co_await refuse_stream(s, mode, shown, port, d, sni);
      co_return;
    }
    co_await tunnel(s, mode, host, port, sni);
    co_return;
  }

  // No name in the bytes: the names this sandbox was told resolve to this address, newest
  // first; the first one allowed on this port wins. Without any, the address itself is
  // decided (an allow_cidrs range may open it).
  std::optional<policy::Decision> first_denial;
  policy::Host denied_host;
  const std::vector<std::string> names = shared.dns_memory.names_for(s.sandbox, original_ip);
  for (const std::string& name : names) {
    const policy::Host host = policy::normalize_host(name);
    const policy::Decision d = s.snap->policy->decide(s.sandbox, host, port, mode);
    if (d.allowed) {
      co_await tunnel(s, mode, host, port, {}, silent);
      co_return;
    }
    if (!first_denial) {
      first_denial = d;
      denied_host = host;
    }
  }
  policy::Decision d = s.snap->policy->decide(s.sandbox, literal, port, mode);
  if (d.allowed) {
    co_await tunnel(s, mode, literal, port, {}, silent);
    co_return;
  }
  if (first_denial) {
    const std::string shown = denied_host.display();
    co_await refuse_stream(s, mode, shown, port, *first_denial);
    co_return;
  }
  // Nothing names it. Metadata, loop and protocol refusals keep their stronger reasons.
  if (d.reason != policy::Reason::always_denied_address && d.reason != policy::Reason::proxy_loop &&
      d.reason != policy::Reason::unrecognized_protocol) {
    d.reason = policy::Reason::unnamed_destination;
  }
  co_await refuse_stream(s, mode, literal_shown, port, d);
}

}  // namespace sandgate::proxy
