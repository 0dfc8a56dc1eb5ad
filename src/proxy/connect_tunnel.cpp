// CONNECT: dial the checked address, confirm, inspect the client's first bytes, relay.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <span>

#include "proxy/relay.hpp"
#include "proxy/session.hpp"
#include "proxy/upstream.hpp"
#include "tls/client_hello.hpp"

namespace sandgate::proxy {

namespace {

using namespace boost::asio::experimental::awaitable_operators;
constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";
constexpr std::string_view kNestedConnect = "CONNECT ";

// What the first client bytes in a tunnel say about where they are really going.
struct Inspection {
  bool allowed = true;
  bool tls = false;
  policy::Reason reason = policy::Reason::allowed_by_rule;
  std::string sni;
};

Inspection refuse(policy::Reason reason, bool tls) {
  Inspection out;
  out.allowed = false;
  out.tls = tls;
  out.reason = reason;
  return out;
}

// The SNI must name the CONNECT host, or another host the sandbox may reach on this port.
Inspection check_hello(const Session& s, const policy::Host& host, std::uint16_t port,
                       const tls::ClientHelloInfo& hello) {
  Inspection out;
  out.tls = true;
  if (!hello.sni) {
    // Clients send no SNI to IP-literal targets; to a named target it hides the destination.
    return host.is_address() ? out : refuse(policy::Reason::sni_missing, true);
  }
  out.sni = *hello.sni;
  const policy::Host sni = policy::normalize_host(*hello.sni);
  if (sni.is_name() && host.is_name() && sni.name == host.name) return out;
  if (sni.is_valid() &&
      s.snap->policy->decide(s.sandbox, sni, port, policy::EntryMode::tls).allowed) {
    return out;
  }
  out.allowed = false;
  out.reason = policy::Reason::sni_mismatch;
  return out;
}

// Reads the client's first bytes (as many as a whole ClientHello needs) without relaying
// them, and decides on them. `pending` keeps every byte read, to be forwarded unchanged.
asio::awaitable<Inspection> inspect(Session& s, const policy::Host& host, std::uint16_t port,
                                    std::vector<std::uint8_t>& pending) {
  for (;;) {
    const std::span<const std::uint8_t> data(pending);
    if (data.size() >= 2 && tls::looks_like_tls(data)) {
      const tls::PeekResult peek = tls::peek_client_hello(data);
      if (peek.status == tls::PeekStatus::complete)
        co_return check_hello(s, host, port, peek.hello);
      if (peek.status != tls::PeekStatus::need_more) {
        co_return refuse(policy::Reason::tls_malformed, true);
      }
    } else if (!data.empty()) {
      // HTTP servers skip empty lines before a request (RFC 9112 2.2); so does this check.
      std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
      text.remove_prefix(std::min(text.find_first_not_of("\r\n"), text.size()));
      const std::size_t n = std::min(text.size(), kNestedConnect.size());
      if (!text.empty() && text.substr(0, n) != kNestedConnect.substr(0, n)) {
        co_return Inspection{};  // not TLS, not CONNECT: an ordinary byte stream (ssh, ...)
      }
      if (n == kNestedConnect.size()) {
        co_return refuse(policy::Reason::nested_proxy, false);
      }
    }
    // Wait for bytes before taking a buffer, so an idle tunnel holds none.
    auto [wait_ec] = co_await s.client.async_wait(tcp::socket::wait_read, use_tuple);
    if (wait_ec) co_return Inspection{};  // idled out or shut down: nothing to relay
    boost::system::error_code ec;
    const std::size_t ready = std::max<std::size_t>(s.client.available(ec), 1);
    const std::size_t old = pending.size();
    pending.resize(old + std::min(ready, tls::kMaxClientHelloBytes + 1));
    const std::size_t n =
        s.client.read_some(asio::buffer(pending.data() + old, pending.size() - old), ec);
    pending.resize(old + n);
    if (ec && ec != asio::error::would_block) co_return Inspection{};  // client closed
  }
}

}  // namespace

asio::awaitable<void> handle_connect(Session& s, const policy::Host& host, std::uint16_t port) {
  auto& shared = *s.deps.shared;
  s.watchdog->arm(s.limits().connect_timeout * 4);  // bounded by per-attempt timeouts inside
  Dialed dialed = co_await dial_checked(s.deps, *s.snap, s.sandbox, host, port);
  if (dialed.error == Errc::network_denied) {
    co_await s.deny(policy::EntryMode::connect, host, port, dialed.denial, &dialed.denied_host);
    co_return;
  }
  if (dialed.error != Errc::ok) {
    co_await s.fail(policy::EntryMode::connect, dialed.error, host.display(), port);
    co_return;
  }
  s.upstream.emplace(std::move(dialed.socket), std::string(), dialed.address);
  tcp::socket& upstream = s.upstream->socket;

  s.watchdog->arm(s.limits().idle_timeout);
  if (co_await s.write_client(kEstablished)) co_return;
  auto tunnel = shared.metrics->active_tunnel();

  // Bytes the client sent right behind the CONNECT head belong to the tunnel.
  std::vector<std::uint8_t> pending(
      static_cast<const std::uint8_t*>(s.buffer.data().data()),
      static_cast<const std::uint8_t*>(s.buffer.data().data()) + s.buffer.size());
  s.buffer.clear();
  s.buffer.shrink_to_fit();

  RelayStats stats;
  Inspection verdict;
  const auto idle = s.limits().idle_timeout;
  // Upstream-to-client runs from the start (server-first protocols); client-to-upstream
  // starts with the inspection.
  auto client_to_upstream = [&]() -> asio::awaitable<void> {
    verdict = co_await inspect(s, host, port, pending);
    if (!verdict.allowed) {
      if (verdict.tls) {
        co_await asio::async_write(s.client, asio::buffer(tls_access_denied_alert()), use_tuple);
      }
      boost::system::error_code ignored;
      s.client.cancel(ignored);
      upstream.cancel(ignored);
      co_return;
    }
    if (!pending.empty()) {
      auto [ec, n] = co_await asio::async_write(upstream, asio::buffer(pending), use_tuple);
      if (ec) co_return;
      stats.up += n;
      std::vector<std::uint8_t>().swap(pending);
    }
    co_await relay_one_way(s.client, upstream, stats.up, *s.watchdog, idle);
  };
  s.watchdog->arm(idle);
  co_await (client_to_upstream() &&
            relay_one_way(upstream, s.client, stats.down, *s.watchdog, idle));

  const std::string dialed_ip = dialed.address.to_string();
  const std::string shown = host.display();
  policy::Decision denial;
  denial.reason = verdict.reason;
  s.record_tunnel(policy::EntryMode::connect, shown, port, dialed_ip, stats.up, stats.down,
                  verdict.sni, verdict.allowed ? nullptr : &denial);
}

}  // namespace sandgate::proxy
