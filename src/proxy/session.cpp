// What every explicit session shares: the audit record, denials and failures.
#include "proxy/session.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "proxy/auth.hpp"
#include "proxy/tls_streams.hpp"

namespace sandgate::proxy {

telemetry::Mode to_metrics_mode(policy::EntryMode m) {
  switch (m) {
    case policy::EntryMode::http:
      return telemetry::Mode::http;
    case policy::EntryMode::connect:
      return telemetry::Mode::connect;
    case policy::EntryMode::tls:
      return telemetry::Mode::tls;
    case policy::EntryMode::tcp:
      return telemetry::Mode::tcp;
    case policy::EntryMode::dns:
      return telemetry::Mode::dns;
  }
  return telemetry::Mode::http;
}

telemetry::AuditRecord Session::record(policy::EntryMode mode) const {
  telemetry::AuditRecord r;
  r.sandbox_id = sandbox;
  r.source_ip = client_ip;
  r.source_port = client_port;
  r.protocol = policy::mode_name(mode);
  r.original_destination = original_destination;
  if (mode == policy::EntryMode::http) {
    if (tls) r.url_scheme = "https";
    r.method = request_method;
    r.url_path = request_path;
    r.credential_name = request_credential;
    r.credential_fingerprint = request_fingerprint;
  }
  return r;
}

std::string_view Session::client_sni() const {
  if (!tls) return {};
  const char* sni = SSL_get_servername(tls->stream.native_handle(), TLSEXT_NAMETYPE_host_name);
  return sni != nullptr ? std::string_view(sni) : std::string_view();
}

asio::awaitable<Dialed> Session::dial(const policy::Host& host, std::uint16_t port) {
  if (sunk) {  // a stream to the DNS sink is never dialled (every request on it is refused)
    Dialed refused(client.get_executor());
    refused.error = Errc::network_denied;
    refused.denial.reason = policy::Reason::stale_dns_answer;
    refused.denied_host = host;
    co_return refused;
  }
  const auto bound = snap->config->dns.timeout + kDialBudgetTimeouts * limits().connect_timeout;
  watchdog->arm(bound + std::chrono::seconds(1));
  Dialed dialed = co_await dial_checked(deps, *snap, sandbox, host, port);
  if (watchdog->expired()) {
    boost::system::error_code ignored;
    dialed.socket.close(ignored);
    dialed.error = Errc::upstream_timeout;
  }
  co_return dialed;
}

void Session::record_denial(policy::EntryMode mode, std::string_view host, std::uint16_t port,
                            const policy::Decision& d, std::string_view sni,
                            std::string_view suggestion) {
  if (reported_at_dns(host)) {  // its line, counts and listing are the DNS listener's
    deps.shared->metrics->connection(metrics_mode(mode), telemetry::Outcome::denied);
    return;
  }
  const std::string_view reason = policy::reason_name(d.reason);
  telemetry::AuditRecord r = record(mode);
  r.event = code_name(Errc::network_denied);
  r.outcome = "failure";
  r.host = host;
  r.port = port;
  r.reason = reason;
  r.rule = d.rule;
  r.tls_sni = sni;
  r.suggestion = suggestion;
  r.operator_message = d.message;
  if (mode == policy::EntryMode::http || mode == policy::EntryMode::connect) r.http_status = 403;
  deps.shared->audit->write(r);
  deps.shared->metrics->denial(reason);
  deps.shared->denials.add(sandbox, r.protocol, host, port, reason, suggestion);
  deps.shared->metrics->connection(metrics_mode(mode), telemetry::Outcome::denied);
}

bool Session::reported_at_dns(std::string_view host) const {
  return sunk && std::find(sunk_names.begin(), sunk_names.end(), host) != sunk_names.end();
}

telemetry::Ended Session::ended(telemetry::Ended seen) const {
  if (aborted) return telemetry::Ended::shutdown;
  if (seen == telemetry::Ended::unset && watchdog->expired()) return telemetry::Ended::timeout;
  return seen == telemetry::Ended::unset ? telemetry::Ended::shutdown : seen;
}

void Session::record_tunnel(policy::EntryMode mode, std::string_view host, std::uint16_t port,
                            std::string_view dialed_ip, const RelayStats& stats,
                            std::string_view sni, const policy::Decision* denial) {
  auto& metrics = *deps.shared->metrics;
  telemetry::AuditRecord r = record(mode);
  r.host = host;
  r.port = port;
  r.destination_ip = dialed_ip;
  r.tls_sni = sni;
  r.bytes_up = stats.up;
  r.bytes_down = stats.down;
  r.ended = ended(stats.ended);
  r.phase = telemetry::Phase::body;
  r.duration = std::chrono::steady_clock::now() - started;
  std::string suggestion;  // r holds a view of it until the line is written
  if (denial != nullptr) {
    r.event = code_name(Errc::network_denied);
    r.outcome = "failure";
    r.reason = policy::reason_name(denial->reason);
    r.rule = denial->rule;
    metrics.denial(r.reason);
    suggestion = placed_suggestion(*denial, policy::normalize_host(host), port, mode);
    r.suggestion = suggestion;
    deps.shared->denials.add(sandbox, r.protocol, host, port, r.reason, suggestion);
    metrics.connection(metrics_mode(mode), telemetry::Outcome::denied);
  } else {
    r.event = "connection_closed";
    r.outcome = "success";
    metrics.connection(metrics_mode(mode), telemetry::Outcome::allowed);
  }
  deps.shared->audit->write(r);
  metrics.bytes(telemetry::Direction::upstream, stats.up);
  metrics.bytes(telemetry::Direction::downstream, stats.down);
}

namespace {
bool speaks_http(policy::EntryMode mode) {
  return mode == policy::EntryMode::http || mode == policy::EntryMode::connect;
}
}  // namespace

void Session::reset_client() {
  boost::system::error_code ignored;
  client.set_option(asio::socket_base::linger(true, 0), ignored);
  client.close(ignored);
}

asio::awaitable<void> Session::deny(policy::EntryMode mode, std::string_view shown,
                                    std::uint16_t port, const policy::Decision& d,
                                    const policy::Host* suggest_for, std::string_view sni,
                                    Responder* to) {
  if (to != nullptr) to->name_request(*this);
  if (d.reason == policy::Reason::misdirected_request) {
    // Not the policy's denial contract: the client is told to ask the right connection.
    const std::string message = "this connection serves only " + intercepted->display() + ":" +
                                std::to_string(intercepted_port) + "; open a new one for " +
                                std::string(shown);
    co_await fail(mode, Errc::misdirected_request, shown, port, message, telemetry::Phase::unset,
                  to);
    co_return;
  }
  // The body's suggestion is made for `suggest_for`; the audit line's also for a refusal
  // without a body (a transparent stream), from the host as shown.
  const std::string suggestion_line =
      suggest_for != nullptr ? placed_suggestion(d, *suggest_for, port, mode) : std::string();
  const std::string logged_suggestion =
      suggest_for != nullptr ? suggestion_line
                             : placed_suggestion(d, policy::normalize_host(shown), port, mode);
  record_denial(mode, shown, port, d, sni, logged_suggestion);
  if (mode == policy::EntryMode::tls) {
    co_await asio::async_write(client, asio::buffer(tls_access_denied_alert()), use_tuple);
    co_return;
  }
  if (!speaks_http(mode)) {
    reset_client();
    co_return;
  }
  const std::string_view reason = policy::reason_name(d.reason);
  ErrorInfo info;
  info.code = Errc::network_denied;
  info.sandbox = sandbox;
  info.host = shown;
  info.port = port;
  info.reason = reason;
  info.rule = d.rule;
  info.suggestion = suggestion_line;
  info.message = d.message;
  // A stale answer of the sink: resolving the name again reaches it.
  if (d.reason == policy::Reason::stale_dns_answer) info.retryable = true;
  const Reply reply =
      d.git.advertisement ? git_refusal_reply(d.git.service(), info) : error_reply(info);
  co_await answer(reply, to);
}

std::string Session::placed_suggestion(const policy::Decision& d, const policy::Host& host,
                                       std::uint16_t port, policy::EntryMode mode) const {
  if (sandbox.empty() || !snap) return {};
  // Where the operator can add it: the sandbox's table, its drop-in, or for a launcher-made
  // sandbox its profile or the launcher's flag (config::home_of).
  return policy::suggest(config::home_of(*snap->config, sandbox), host, port, d, mode).text();
}

void Session::record_failure(policy::EntryMode mode, Errc code, std::string_view host,
                             std::uint16_t port, int status, telemetry::Phase phase,
                             telemetry::Ended ended) {
  telemetry::AuditRecord r = record(mode);
  r.event = code_name(code);
  r.outcome = "failure";
  r.host = host;
  r.port = port;
  r.http_status = status;
  if (phase != telemetry::Phase::unset) {
    using telemetry::Ended;
    r.phase = phase;
    r.ended = aborted                                   ? Ended::shutdown
              : ended != Ended::unset                   ? ended
              : code == Errc::upstream_timeout          ? Ended::timeout
              : code == Errc::upstream_connect_failed   ? Ended::upstream_reset
              : code == Errc::local_resources_exhausted ? Ended::resources
                                                        : Ended::unset;
  }
  if (code == Errc::credential_unavailable) {
    r.credential_endpoint_status = static_cast<int>(request_endpoint_status);
    r.credential_endpoint_error = request_endpoint_error;
  }
  deps.shared->audit->write(r);
  // Said once: another stream of the connection must not carry it.
  request_endpoint_status = 0;
  request_endpoint_error = {};
  deps.shared->metrics->error(code);
  deps.shared->metrics->connection(metrics_mode(mode), telemetry::Outcome::error);
}

asio::awaitable<void> Session::fail(policy::EntryMode mode, Errc code, std::string_view host,
                                    std::uint16_t port, std::string_view message,
                                    telemetry::Phase phase, Responder* to,
                                    std::optional<bool> retryable, telemetry::Ended ended) {
  if (to != nullptr) to->name_request(*this);
  if (!speaks_http(mode)) {
    record_failure(mode, code, host, port, 0, phase, ended);
    reset_client();
    co_return;
  }
  record_failure(mode, code, host, port, static_cast<int>(http_status(code)), phase, ended);

  ErrorInfo info;
  info.code = code;
  info.sandbox = sandbox;
  info.host = host;
  info.port = port;
  info.message = message;
  info.retryable = retryable;
  const Reply reply = error_reply(info);
  co_await answer(reply, to);
}

asio::awaitable<void> Session::refuse_auth(policy::EntryMode mode, const AuthResult& auth,
                                           std::string_view host, std::uint16_t port) {
  const bool challenge = auth.outcome == telemetry::AuthOutcome::no_credentials;
  const auto status = static_cast<int>(http_status(Errc::proxy_auth_required));
  telemetry::AuditRecord r = record(mode);
  r.event = code_name(Errc::proxy_auth_required);
  r.outcome = challenge ? "unknown" : "failure";
  r.reason = telemetry::name(auth.outcome);
  // The known id a wrong token was sent for, else the connection's bound identity (if any);
  // never an unknown id.
  r.sandbox_id = auth.sandbox.empty() ? std::string_view(sandbox) : auth.sandbox;
  r.host = host;
  r.port = port;
  r.http_status = status;
  deps.shared->audit->write(r);
  if (!challenge) deps.shared->metrics->error(Errc::proxy_auth_required);
  deps.shared->metrics->connection(
      metrics_mode(mode), challenge ? telemetry::Outcome::denied : telemetry::Outcome::error);
  ErrorInfo info;
  info.code = Errc::proxy_auth_required;
  info.sandbox = sandbox;  // only a connection's bound identity is ever told back
  info.host = host;
  info.port = port;
  const AuthRefusal told = auth_refusal(auth.outcome);  // an unknown id looks like a bad token
  info.reason = told.reason;
  info.message = told.message;
  const Reply reply = error_reply(info);
  co_await answer(reply, nullptr);
}

asio::awaitable<void> Session::answer(const Reply& reply, Responder* to) {
  if (to != nullptr) {
    co_await to->send(reply);
    co_return;
  }
  const std::string text = http1_text(reply);
  watchdog->arm(limits().header_timeout);
  co_await write_client(text);
}

}  // namespace sandgate::proxy
