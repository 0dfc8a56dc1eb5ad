// CONNECT: dial the checked address, confirm, inspect the client's first bytes, relay.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <span>

#include "proxy/relay.hpp"
#include "proxy/session.hpp"
#include "proxy/upstream.hpp"
#include "tls/client_hello.hpp"

namespace sandgate::proxy {

namespace {

constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";
constexpr std::size_t kMaxMethodBytes = 20;
constexpr std::size_t kMaxSchemeBytes = 32;

// What the start of a plain-text stream says: a request meant for a proxy (CONNECT, or any
// method with an absolute-form "scheme://" target, which clients send only to proxies: RFC
// 9112 3.2.2), something else (an origin-form request, ssh, ...), or not enough yet.
enum class PlainStart { need_more, proxy_request, other };

PlainStart classify_plain(std::string_view text) {
  const auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  const auto scheme_char = [&](char c, bool first) {  // RFC 3986 3.1
    if (upper(c) || (c >= 'a' && c <= 'z')) return true;
    return !first && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.');
  };
  std::size_t i = 0;  // the method: an upper-case token, then a space
  while (i < text.size() && i <= kMaxMethodBytes && upper(text[i])) ++i;
  if (i == text.size()) return i <= kMaxMethodBytes ? PlainStart::need_more : PlainStart::other;
  if (i == 0 || text[i] != ' ') return PlainStart::other;
  if (text.substr(0, i) == "CONNECT") return PlainStart::proxy_request;
  // The target: origin-form starts with '/', absolute-form with a scheme and "://".
  const std::string_view target = text.substr(i + 1);
  std::size_t j = 0;
  while (j < target.size() && j <= kMaxSchemeBytes && scheme_char(target[j], j == 0)) ++j;
  if (j == target.size() && j <= kMaxSchemeBytes) return PlainStart::need_more;
  if (j == 0 || j > kMaxSchemeBytes) return PlainStart::other;
  const std::string_view rest = target.substr(j);
  const std::size_t n = std::min<std::size_t>(rest.size(), 3);
  if (rest.substr(0, n) != std::string_view("://").substr(0, n)) return PlainStart::other;
  return n == 3 ? PlainStart::proxy_request : PlainStart::need_more;
}

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

// Decides the tunnel on the client's first bytes (as many as a whole ClientHello needs):
// a ClientHello's SNI, or a request meant for a proxy; any other stream passes.
class ConnectGate final : public FirstBytesGate {
 public:
  ConnectGate(const Session& s, policy::Host host, std::uint16_t port)
      : s_(s), host_(std::move(host)), port_(port) {}

  Verdict check(std::span<const std::uint8_t> data) override {
    if (data.size() >= 2 && tls::looks_like_tls(data)) {
      const tls::PeekResult peek = tls::peek_client_hello(data);
      if (peek.status == tls::PeekStatus::complete) {
        verdict_ = check_hello(s_, host_, port_, peek.hello);
      } else if (peek.status == tls::PeekStatus::need_more) {
        return Verdict::need_more;
      } else {
        verdict_ = refuse(policy::Reason::tls_malformed, true);
      }
    } else if (!data.empty()) {
      // HTTP servers skip empty lines before a request (RFC 9112 2.2); so does this check,
      // up to a bound.
      std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
      text.remove_prefix(std::min(text.find_first_not_of("\r\n"), text.size()));
      const PlainStart start = classify_plain(text);
      if (start == PlainStart::other) return Verdict::pass;
      if (start == PlainStart::need_more && data.size() <= tls::kMaxClientHelloBytes) {
        return Verdict::need_more;
      }
      verdict_ = refuse(policy::Reason::nested_proxy, false);
    } else {
      return Verdict::need_more;
    }
    return verdict_.allowed ? Verdict::pass : Verdict::refuse;
  }

  std::string_view refusal() const override {
    return verdict_.tls ? tls_access_denied_alert() : std::string_view();
  }

  const Inspection& inspection() const { return verdict_; }

 private:
  const Session& s_;
  policy::Host host_;
  std::uint16_t port_;
  Inspection verdict_;
};

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
  s.active_tunnel = shared.metrics->active_tunnel();

  // Bytes the client sent right behind the CONNECT head belong to the tunnel; nothing goes
  // upstream before the gate has passed them. Upstream-to-client runs from the start
  // (server-first protocols). The relay keeps the session; this coroutine ends here.
  auto gate = std::make_shared<ConnectGate>(s, host, port);
  start_relay(s.client, upstream, *s.watchdog, s.limits().idle_timeout, s.take_buffer(), gate.get(),
              [session = s.shared_from_this(), gate, shown = host.display(), port,
               dialed_ip = dialed.address.to_string()](const RelayStats& stats, bool refused) {
                const Inspection& verdict = gate->inspection();
                policy::Decision denial;
                denial.reason = verdict.reason;
                session->record_tunnel(policy::EntryMode::connect, shown, port, dialed_ip, stats.up,
                                       stats.down, verdict.sni, refused ? &denial : nullptr);
              });
}

}  // namespace sandgate::proxy
