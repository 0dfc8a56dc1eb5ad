// An intercepted stream: sandgate is the TLS server to the client, under a leaf for the
// intercepted name minted by its own CA, and the TLS client to that name upstream (its own
// connection, verified, dialled when the first request has been decided). Every request
// inside is decided on its own through the request filters, like plain HTTP.
#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/interception.hpp"
#include "proxy/session.hpp"
#include "proxy/tls_streams.hpp"

namespace sandgate::proxy {

asio::awaitable<void> intercept_stream(Session& s, const policy::StreamVerdict& v,
                                       std::uint16_t port) {
  auto& shared = *s.deps.shared;
  const std::string shown = v.shown;
  if (v.sunk && !shared.interception) {
    // No CA to answer a sunk stream's requests with: the TLS alert says it was refused.
    co_await s.deny(v.mode, shown, port, v.decision, nullptr, shown);
    co_return;
  }
  if (!shared.interception) {
    // Config validation keeps inspected hosts and the CA together; never splice instead.
    co_await s.fail(v.mode, Errc::internal_error, shown, port, "interception is not configured");
    co_return;
  }
  // The leaf first, so that a sandbox over its minting budget gets CONNECT's 429 (a
  // transparent stream: a reset) rather than a handshake that cannot come.
  auto& interception = *shared.interception;
  const std::string& sandbox = s.sandbox;
  tls::LeafCache& leaves = v.sunk ? *interception.sink_leaves : *interception.leaves;
  const auto leaf =
      leaves.get(v.dial.display(), [&] { return interception.mint_budget->take(sandbox); });
  if (!leaf && leaf.error() == make_error_code(Errc::too_many_leaf_mints)) {
    co_await s.fail(v.mode, Errc::too_many_leaf_mints, shown, port,
                    "this sandbox made sandgate mint too many certificates for new names; "
                    "try again later");
    co_return;
  }
  if (!leaf) {
    co_await s.fail(v.mode, Errc::internal_error, shown, port, "no certificate for the name");
    co_return;
  }
  if (v.mode == policy::EntryMode::connect) {
    s.watchdog->arm(s.limits().idle_timeout);
    if (co_await s.write_client(kEstablished)) co_return;
  }
  SSL* ssl = SSL_new(leaf.value()->server_context().get());
  if (ssl == nullptr) {
    s.record_failure(policy::EntryMode::tls, Errc::internal_error, shown, port);
    s.reset_client();
    co_return;
  }
  s.tls = std::make_unique<ClientTlsLeg>(s.client, s.take_buffer(), ssl);
  s.watchdog->arm(s.limits().header_timeout);
  auto [ec] = co_await s.tls->stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
  if (ec) {
    // The client refused the leaf (it does not trust sandgate's CA), or sent no TLS. A sunk
    // stream's name was refused and logged by the DNS listener: no second line.
    if (s.reported_at_dns(shown)) {
      s.tls.reset();
      s.reset_client();
      co_return;
    }
    s.record_failure(policy::EntryMode::tls, Errc::client_tls_failed, shown, port, 0,
                     telemetry::Phase::connect);
    shared.metrics->interception_tls_failure(Side::client);
    s.tls.reset();
    s.reset_client();
    co_return;
  }
  s.intercepted = std::make_unique<const policy::Host>(v.dial);
  s.intercepted_port = port;
  if (alpn_is_h2(s.tls->stream.native_handle())) {
    co_await serve_h2(s);
  } else {
    for (bool first = true;; first = false) {
      auto request = co_await next_request(s, first);
      if (!request) break;
      if (!co_await forward_request(s, *request, port)) break;
    }
  }
  co_await close_client_tls(s);
}

asio::awaitable<void> close_client_tls(Session& s) {
  if (!s.tls || s.aborted || s.client_cut || s.client_send_shut || !s.client.is_open()) {
    co_return;
  }
  SSL* ssl = s.tls->stream.native_handle();
  // Not after a fatal error (OpenSSL is then back "in init"), and only once.
  if (SSL_is_init_finished(ssl) != 1 || (SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN) != 0) {
    co_return;
  }
  // Send-only: marked as if the client's close_notify had come, SSL_shutdown writes ours and
  // is done, and what the client still sends is never read (the connection is closed next;
  // linger_close drains it).
  SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
  s.watchdog->arm(kTlsCloseTime);
  co_await s.tls->stream.async_shutdown(use_tuple);
}

}  // namespace sandgate::proxy
