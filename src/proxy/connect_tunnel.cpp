// CONNECT: dial the checked address, confirm, let the stream gate pass the client's first
// bytes, relay.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "proxy/relay.hpp"
#include "proxy/session.hpp"
#include "proxy/stream_gate.hpp"
#include "proxy/upstream.hpp"

namespace sandgate::proxy {

constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";

asio::awaitable<void> handle_connect(Session& s, const policy::Host& host, std::uint16_t port) {
  auto& shared = *s.deps.shared;
  Dialed dialed = co_await s.dial(host, port);
  if (dialed.error == Errc::network_denied) {
    co_await s.deny(policy::EntryMode::connect, host, port, dialed.denial, &dialed.denied_host);
    co_return;
  }
  if (dialed.error != Errc::ok) {
    co_await s.fail(policy::EntryMode::connect, dialed.error, host.display(), port, {},
                    telemetry::Phase::connect);
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
  auto gate = std::make_shared<StreamGate>(s, host, port);
  start_relay(s.client, upstream, *s.watchdog, s.limits().idle_timeout, s.take_buffer(), gate.get(),
              [session = s.shared_from_this(), gate, shown = host.display(), port,
               dialed_ip = dialed.address.to_string()](const RelayStats& stats) {
                session->record_tunnel(policy::EntryMode::connect, shown, port, dialed_ip, stats,
                                       gate->sni(), gate->denial());
              });
}

}  // namespace sandgate::proxy
