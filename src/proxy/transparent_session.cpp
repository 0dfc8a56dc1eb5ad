// The transparent session: a connection the launcher's nftables rules redirected here. The
// sandbox is known by its source address; the destination name comes from the connection's
// own first bytes (TLS SNI, HTTP Host) or, for protocols that carry no name, from the
// sandbox's recent DNS answers. The original destination address is only recorded: the name
// is decided, resolved and dialled like any other, on the same decision path. The one
// address that matters is the DNS sink's (Dns::sink_address): a connection to it was refused
// at DNS and is only answered with its refusal, in its own protocol (policy::decide_stream).
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <span>

#include "policy/stream.hpp"
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

policy::Opening to_opening(StreamStart kind) {
  switch (kind) {
    case StreamStart::need_more:
      return policy::Opening::silent;
    case StreamStart::tls:
      return policy::Opening::tls;
    case StreamStart::tls_malformed:
      return policy::Opening::tls_malformed;
    case StreamStart::http:
      return policy::Opening::http;
    case StreamStart::proxy_request:
      return policy::Opening::proxy_request;
    case StreamStart::other:
      return policy::Opening::other;
    case StreamStart::undecidable:
      return policy::Opening::undecidable;
  }
  return policy::Opening::undecidable;
}

// HTTP/1 requests, each decided on its own Host and the original port, forwarded like the
// explicit proxy's (so a second request on the connection cannot ride on the first's name).
asio::awaitable<void> serve_http(Session& s, std::uint16_t port) {
  for (bool first = true;; first = false) {
    auto request = co_await next_request(s, first);
    if (!request) co_return;
    if (!co_await forward_request(s, *request, port)) co_return;
  }
}

}  // namespace

asio::awaitable<void> serve_transparent(tcp::socket socket, tcp::endpoint peer, WorkerDeps deps) {
  const auto session = std::make_shared<Session>(std::move(socket), peer, std::move(deps));
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

  policy::StreamFacts facts;
  facts.sandbox = s.snap->sandbox_for(to_policy(peer.address()));
  facts.original = original_ip;
  facts.port = port;
  if (facts.sandbox == nullptr) {
    const policy::StreamVerdict v = policy::decide_stream(*s.snap->policy, facts);
    co_await s.deny(v.mode, v.shown, port, v.decision, nullptr);
    co_return;
  }
  if (s.bind_sandbox(*facts.sandbox) != Errc::ok) {
    co_await s.fail(policy::EntryMode::tcp, Errc::too_many_connections, {}, port);
    co_return;
  }

  s.watchdog->arm(s.limits().header_timeout);
  const Opening opening = co_await read_opening(s, port);
  if (opening.closed) co_return;
  s.snap = shared.current();  // decide on the newest policy
  const FirstBytes& first = opening.first;
  facts.sandbox = &s.sandbox;
  facts.opening = to_opening(first.kind);
  facts.sni = first.hello.sni ? &*first.hello.sni : nullptr;
  facts.sink = original_ip == s.snap->config->dns.sink_address;
  std::vector<std::string> names = facts.opening == policy::Opening::tls && facts.sni && !facts.sink
                                       ? std::vector<std::string>()
                                       : shared.dns_memory.names_for(s.sandbox, original_ip);
  facts.dns_names = names;
  policy::StreamVerdict v = policy::decide_stream(*s.snap->policy, facts);
  // No rule names it, and the sandbox asks first: decided again once an operator allowed it
  // (or its DNS question's hold did, for the name on every port).
  co_await settle_held_stream(s, facts, v, port);
  if (v.sunk) {
    s.sunk = true;
    s.sunk_names = std::move(names);
  }
  const std::string_view sni = facts.sni ? std::string_view(*facts.sni) : std::string_view();
  switch (v.action) {
    case policy::StreamAction::serve_http:
      co_await serve_http(s, port);
      co_return;
    case policy::StreamAction::refuse:
      co_await s.deny(v.mode, v.shown, port, v.decision, nullptr, sni);
      co_return;
    case policy::StreamAction::tunnel:
    case policy::StreamAction::intercept:
      co_await open_stream(s, v, port, sni);
      co_return;
  }
}

}  // namespace sandgate::proxy
