// The one place an allowed stream opens, for every entry mode (a CONNECT tunnel, a
// transparent connection), splice or interception as the verdict says. Spliced: dial the
// decided host, tell a CONNECT client the tunnel is up, then relay, through the tunnel's gate
// while the client's first bytes are still to come. Intercepted: intercept_stream.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "proxy/relay.hpp"
#include "proxy/session.hpp"
#include "proxy/stream_gate.hpp"
#include "proxy/upstream.hpp"

namespace sandgate::proxy {

asio::awaitable<void> open_stream(Session& s, const policy::StreamVerdict& v, std::uint16_t port,
                                  std::string_view sni) {
  if (v.action == policy::StreamAction::intercept) {
    co_await intercept_stream(s, v, port);
    co_return;
  }
  auto& shared = *s.deps.shared;
  const policy::EntryMode mode = v.mode;
  const std::string shown = v.shown;
  Dialed dialed = co_await s.dial(v.dial, port);
  if (dialed.error == Errc::network_denied) {
    co_await s.deny(mode, shown, port, dialed.denial, &dialed.denied_host, sni);
    co_return;
  }
  if (dialed.error != Errc::ok) {
    co_await s.fail(mode, dialed.error, shown, port, {}, telemetry::Phase::connect);
    co_return;
  }
  s.upstream =
      std::make_unique<UpstreamConn>(std::move(dialed.socket), std::string(), dialed.address);
  tcp::socket& upstream = s.upstream->socket;
  if (mode == policy::EntryMode::connect) {
    s.watchdog->arm(s.limits().idle_timeout);
    if (co_await s.write_client(kEstablished)) co_return;
  }
  s.active_tunnel = shared.metrics->active_tunnel();

  // Bytes already read from the client (behind the CONNECT head, or read to classify a
  // transparent connection) go first; with a gate, none goes upstream before it let them go.
  // Upstream-to-client runs from the start (server-first protocols). The relay keeps the
  // session; this coroutine ends here.
  auto gate = v.gated ? std::make_shared<StreamGate>(s, v.dial, port) : nullptr;
  start_relay(
      s.client, upstream, *s.watchdog, s.limits().idle_timeout, s.take_buffer(), gate.get(),
      [session = s.shared_from_this(), gate, mode, shown, port,
       dialed_ip = dialed.address.to_string(), sni = std::string(sni)](const RelayStats& stats) {
        session->client_send_shut = stats.client_send_shut;
        if (gate == nullptr) {
          session->record_tunnel(mode, shown, port, dialed_ip, stats, sni);
          return;
        }
        // A transparent tunnel whose late first bytes were a ClientHello was TLS.
        const bool tls = mode != policy::EntryMode::connect && !gate->sni().empty();
        session->record_tunnel(tls ? policy::EntryMode::tls : mode, shown, port, dialed_ip, stats,
                               gate->sni(), gate->denial());
      });
}

}  // namespace sandgate::proxy
