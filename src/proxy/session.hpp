#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/errc.hpp"
#include "http/request_head.hpp"
#include "policy/policy.hpp"
#include "policy/stream.hpp"
#include "proxy/auth.hpp"
#include "proxy/relay.hpp"
#include "proxy/responses.hpp"
#include "proxy/runtime.hpp"
#include "proxy/upstream.hpp"
#include "proxy/watchdog.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::proxy {

class RequestBody;  // proxy/interception/request_body.hpp

// The TLS legs of an intercepted connection (proxy/tls_streams.hpp).
struct ClientTlsLeg;
struct UpstreamTlsLeg;
// A Proxy-Authorization verdict (proxy/auth.hpp).
struct AuthResult;

// An upstream connection kept between keep-alive requests for one authority.
struct UpstreamConn {
  UpstreamConn(tcp::socket s, std::string auth, const policy::IpAddress& a);
  ~UpstreamConn();
  UpstreamConn(const UpstreamConn&) = delete;
  UpstreamConn& operator=(const UpstreamConn&) = delete;

  tcp::socket socket;
  std::unique_ptr<UpstreamTlsLeg> tls;  // intercepted: sandgate's own TLS over `socket`
  boost::beast::flat_buffer buffer;
  std::string authority;  // normalised host + ":" + port it serves
  policy::IpAddress address;
  // Between two responses: the last one was read whole and the destination keeps the
  // connection alive (UpstreamPool takes only such).
  bool idle = false;
};

telemetry::Mode to_metrics_mode(policy::EntryMode m);

// Where a reply sandgate answers itself goes when it is not the client connection's HTTP/1
// stream: one HTTP/2 stream of an intercepted connection.
class Responder {
 public:
  virtual ~Responder() = default;
  virtual asio::awaitable<void> send(const Reply& reply) = 0;
  // Names the request the reply answers (Session::request_method, request_path) right before
  // its line is written: streams of one connection interleave.
  virtual void name_request(Session&) const {}
};

// One client connection on a listener, from accept to close, on the worker that accepted it;
// everything here runs on that worker. Owned by the serving coroutine and, once a tunnel is
// relayed, by the relay (the coroutine may end first).
struct Session : std::enable_shared_from_this<Session> {
  // Starts the watchdog and counts the connection. `peer`: the client's address, from accept.
  Session(tcp::socket s, const tcp::endpoint& peer, WorkerDeps d);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Closes both sockets: every pending operation ends and the session unwinds (shutdown, or a
  // reload that removed the sandbox). What is in flight is then logged as ended by shutdown.
  void abort();
  // Ends a connection that has not bound its sandbox yet because the pending pool needs its
  // place: its read is cancelled and it is answered TOO_MANY_CONNECTIONS. Runs on the
  // session's worker (posted by the pool); nothing once the sandbox is bound.
  void evict();
  // Binds the connection to its sandbox, enforcing max_connections and the per-sandbox cap,
  // and gives back its unauthenticated place. A later request on the same connection must
  // name the same sandbox.
  Errc bind_sandbox(const std::string& id);

  tcp::socket client;
  WorkerDeps deps;
  std::shared_ptr<const Snapshot> snap;  // the snapshot this request is decided on
  boost::beast::flat_buffer buffer;      // bytes read from the client, not yet handled
  std::shared_ptr<Watchdog> watchdog;
  std::uint16_t client_port = 0;
  std::string client_ip;
  // The client has had its FIN (the relay passed upstream's on): the close needs no shutdown.
  bool client_send_shut = false;
  // The client connection ends in the middle of what it was being sent (a response cut
  // short, an upgraded stream that was reset): its TLS leg is closed without close_notify,
  // so that the client cannot take the cut for the end (close_client_tls).
  bool client_cut = false;
  std::string sandbox;               // bound at the first authenticated request
  AuthMemo auth_memo;                // the Proxy-Authorization value it was bound with
  std::string original_destination;  // transparent: "ip:port" the sandbox dialled
  std::atomic<std::size_t>* sandbox_connections = nullptr;
  std::unique_ptr<UpstreamConn> upstream;
  // More upstream sockets in use (an HTTP/2 client's streams, each over its own): the
  // deadline and abort() reach them like `upstream`.
  std::vector<tcp::socket*> more_upstreams;
  // Intercepted (StreamAction::intercept): the client's TLS, terminated here with a leaf for
  // `intercepted`, the name (and port) every request inside must address.
  std::unique_ptr<ClientTlsLeg> tls;
  std::unique_ptr<const policy::Host> intercepted;  // on the heap: most streams are spliced
  std::uint16_t intercepted_port = 0;
  // The request being decided and forwarded (forward_request), so that every line about it
  // names its method and path (record() adds them; the query never reaches a line).
  std::string_view request_method;
  std::string_view request_path;
  // ... and the credential attached to it, if any (credential.name, credential.fingerprint).
  std::string_view request_credential;
  std::string_view request_fingerprint;
  // ... and when its credential could not be had, what the token endpoint answered (the
  // CREDENTIAL_UNAVAILABLE line's credential.endpoint.*; secrets::TokenError).
  unsigned request_endpoint_status = 0;
  std::string_view request_endpoint_error;
  // The stream came to the DNS sink (StreamVerdict::sunk): every request on it is refused
  // (RequestFacts::sunk). `sunk_names`: the names the sandbox's DNS refused with the sink
  // address, whose refusal the DNS line reported already (reported_at_dns).
  bool sunk = false;
  std::vector<std::string> sunk_names;
  bool aborted = false;  // abort() was called
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // An explicit-proxy connection's place in the pending pool, held from its start until the
  // sandbox is bound (see PendingSlot).
  PendingSlot pending;
  // The pending pool ended this connection to make room for a newer one (evict()).
  bool evicted = false;
  telemetry::Metrics::Active active_connection;
  telemetry::Metrics::Active active_tunnel;  // while a tunnel is relayed

  const config::Limits& limits() const { return snap->config->limits; }

  // Moves the bytes read from the client but not handled yet out of `buffer`, which then
  // holds no memory (a relayed tunnel takes them along).
  std::vector<std::uint8_t> take_buffer();

  // Dials an allowed destination (dial_checked) with the watchdog armed for the whole dial's
  // bound (DNS, then the connect budget). Should the deadline pass anyway, the dial counts as
  // upstream_timeout and its socket is closed: no phase goes on without a deadline. A sunk
  // session never dials (network_denied, stale_dns_answer).
  asio::awaitable<Dialed> dial(const policy::Host& host, std::uint16_t port);

  // Writes raw bytes to the client (through its TLS when intercepted) under the session's
  // current deadline.
  asio::awaitable<boost::system::error_code> write_client(std::string_view bytes);

  // Audit line and metrics of a refusal by policy; `sni` when a ClientHello was read;
  // `suggestion`: the placed config line that would allow it (labels.suggestion), if any.
  void record_denial(policy::EntryMode mode, std::string_view host, std::uint16_t port,
                     const policy::Decision& d, std::string_view sni = {},
                     std::string_view suggestion = {});
  // The config line that would allow what `d` refused, placed where this sandbox is defined
  // (policy::suggest), as the 403 body and the audit line carry it; "" when none.
  std::string placed_suggestion(const policy::Decision& d, const policy::Host& host,
                                std::uint16_t port, policy::EntryMode mode) const;
  // Audit line and metrics of a failure with its own code; `status`: the HTTP status sent, if
  // any (0: none, e.g. a stream that is reset).
  // `phase`: where an exchange past the decision ended (connect for a failed dial).
  // `ended`: what ended it, when the caller knows; else it follows from the code.
  void record_failure(policy::EntryMode mode, Errc code, std::string_view host, std::uint16_t port,
                      int status = 0, telemetry::Phase phase = telemetry::Phase::unset,
                      telemetry::Ended ended = telemetry::Ended::unset);
  // Audit line and metrics of a finished tunnel (CONNECT or transparent): bytes each way, what
  // ended it, duration, the address dialled. `denial`: the tunnel's gate refused it.
  void record_tunnel(policy::EntryMode mode, std::string_view host, std::uint16_t port,
                     std::string_view dialed_ip, const RelayStats& stats, std::string_view sni,
                     const policy::Decision* denial = nullptr);
  // How an exchange ended that `seen` says ended by itself: as shutdown once abort() was
  // called, as a timeout once the watchdog fired.
  telemetry::Ended ended(telemetry::Ended seen) const;
  // The one reporter of a refusal by policy, for every entry mode: audit line, metrics, then
  // the signal the client understands: the 403 with the denial contract (http, connect; its
  // suggestion made for `suggest_for`), a TLS alert (tls), a reset (tcp). `shown`: the
  // destination as logged; `sni` when a ClientHello was read.
  // `to`: where the reply goes instead of the client connection (an HTTP/2 stream).
  asio::awaitable<void> deny(policy::EntryMode mode, std::string_view shown, std::uint16_t port,
                             const policy::Decision& d, const policy::Host* suggest_for,
                             std::string_view sni = {}, Responder* to = nullptr);
  // The same for any other failure with its own code: the error response (http, connect),
  // or a reset (tls, tcp).
  // `retryable` overrides the code's own (CREDENTIAL_UNAVAILABLE is retryable or not).
  asio::awaitable<void> fail(policy::EntryMode mode, Errc code, std::string_view host = {},
                             std::uint16_t port = 0, std::string_view message = {},
                             telemetry::Phase phase = telemetry::Phase::unset,
                             Responder* to = nullptr, std::optional<bool> retryable = {},
                             telemetry::Ended ended = telemetry::Ended::unset);
  // The reporter of a request whose Proxy-Authorization did not prove an identity
  // (authenticate()): the PROXY_AUTH_REQUIRED line with the outcome as event.reason (the
  // challenge, no_credentials, with outcome "unknown": it is not a failure), the metrics
  // (sandgate_proxy_auth_total is counted by the caller; sandgate_errors_total only for a
  // real failure), then the 407 with its challenge.
  asio::awaitable<void> refuse_auth(policy::EntryMode mode, const AuthResult& auth,
                                    std::string_view host, std::uint16_t port);
  // Sends a reply sandgate answers itself: to `to`, else as HTTP/1.1 on the client connection.
  asio::awaitable<void> answer(const Reply& reply, Responder* to);
  // Closes the client connection with a TCP reset, so it fails at once instead of timing out.
  void reset_client();

  // A sunk stream's refusal of a name the DNS listener refused and logged already: counted,
  // not written again (one refusal, one line).
  bool reported_at_dns(std::string_view host) const;

  // The metrics' mode of a line in `mode`: https for a request inside an intercepted stream.
  telemetry::Mode metrics_mode(policy::EntryMode mode) const {
    return tls && mode == policy::EntryMode::http ? telemetry::Mode::https : to_metrics_mode(mode);
  }
  // Base audit record with the fields every line of this session shares.
  telemetry::AuditRecord record(policy::EntryMode mode) const;
  // Intercepted: the server name the client's ClientHello sent to sandgate (valid while `tls`
  // lives); empty when it sent none, or when the session is not intercepted.
  std::string_view client_sni() const;
};

// Reads and parses the next request head (refreshing s.snap) and consumes its bytes from
// s.buffer, where the bytes after it (the body, the next request) stay. A malformed or
// timed-out head has been answered with its error (audit line, 4xx); nullopt then, and when
// the client went away or idled out between requests: the connection is over.
asio::awaitable<std::optional<http::RequestHead>> next_request(Session& s, bool first);

// `peer`: the client's address as accept(2) gave it.
asio::awaitable<void> serve_explicit(tcp::socket client, tcp::endpoint peer, WorkerDeps deps);
asio::awaitable<void> serve_transparent(tcp::socket client, tcp::endpoint peer, WorkerDeps deps);

// Opens a stream that decide_stream allowed (StreamAction::tunnel), for every entry mode:
// dial, CONNECT's 200, then relay through the tunnel's gate when v.gated. Failures and
// refusals reach the client as its entry mode understands them (Session::deny, fail).
asio::awaitable<void> open_stream(Session& s, const policy::StreamVerdict& v, std::uint16_t port,
                                  std::string_view sni);

// Opens a stream that decide_stream chose to intercept (StreamAction::intercept): CONNECT's
// 200, TLS with the client under a leaf for v.dial, then every request inside decided and
// forwarded over sandgate's own TLS to the same name.
inline constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";

asio::awaitable<void> intercept_stream(Session& s, const policy::StreamVerdict& v,
                                       std::uint16_t port);

// How an upstream connection names what it serves: the host, and the port unless it is the
// scheme's default (443 when intercepted, else 80).
std::string upstream_authority(const Session& s, const policy::Host& host, std::uint16_t port);

// True when a kept-alive upstream connection still looks usable (not closed by the server,
// no stray bytes waiting). Over TLS, bytes may wait that are no response (a TLS 1.3 session
// ticket): only a close or an error rules the connection out.
bool upstream_reusable(UpstreamConn& up);

// What a client is told when the destination failed an exchange after the request went out
// and before the response's head came back: UPSTREAM_TIMEOUT when a deadline ended it (the
// session's, or asio::error::timed_out from one of the caller's own), UPSTREAM_PROTOCOL_ERROR
// for a response sandgate cannot frame, else UPSTREAM_CONNECT_FAILED (the destination closed or
// reset the connection, or reset its HTTP/2 stream), retryable only for an idempotent method:
// the destination may have acted on the request. `ended` says what ended it (shutdown: the
// daemon is stopping, and nobody is told).
struct UpstreamFault {
  Errc code = Errc::upstream_connect_failed;
  telemetry::Ended ended = telemetry::Ended::upstream_close;
  std::optional<bool> retryable;  // set for UPSTREAM_CONNECT_FAILED
  std::string_view message;
};
UpstreamFault upstream_fault(const Session& s, const boost::system::error_code& ec,
                             std::string_view method);

// The target the destination is sent: for a host with request rules, the canonical path its
// rules matched (dot-segments, unreserved escapes resolved; the query as sent), so that it
// never reads another spelling differently; else `target` as sent.
std::string forwarded_target(const Session& s, const policy::Host& host, std::uint16_t port,
                             std::string_view target);

// Sandgate's own TLS to the intercepted name over up.socket, dialled for it: SNI and the
// verified name are the host (or its address for a literal), against the system roots and
// [interception] upstream_ca_file. ALPN offers http/1.1, or h2 first when `offer_h2`.
// Errc::ok, upstream_tls_failed with the reason in `why`, or upstream_timeout.
asio::awaitable<Errc> upstream_tls(Session& s, UpstreamConn& up, const policy::Host& host,
                                   std::string& why, bool offer_h2);

// An intercepted connection whose client chose HTTP/2 by ALPN: each stream a request,
// decided through the request filters and forwarded to the intercepted name over HTTP/2
// when it speaks it (one multiplexed connection), else over HTTP/1.1 connections.
asio::awaitable<void> serve_h2(Session& s);

// One plain HTTP request of a client connection (explicit absolute form, or transparent):
// through the request filters (policy::decide_request first), then forwarded by handle_http.
// `port`: the request's port (the transparent listener: the port the sandbox dialled).
// Returns true when the connection may carry another request.
asio::awaitable<bool> forward_request(Session& s, http::RequestHead& head, std::uint16_t port);

// Ends the client's TLS leg of an intercepted connection cleanly, as nginx does: close_notify
// is sent (under a deadline of kTlsCloseTime, so that a client that reads nothing cannot hold
// the session), the client's own is not waited for. OpenSSL keeps a session for resumption
// by ID only when its connection ended so. Nothing when there is no TLS leg, its handshake
// never finished or failed, close_notify went already, or the connection is gone or cut
// (reset, abort, client_cut, client_send_shut).
asio::awaitable<void> close_client_tls(Session& s);
inline constexpr std::chrono::milliseconds kTlsCloseTime{1000};

// Closes the client connection after a reply sent before its request was read whole: our
// side is shut (close_notify first when intercepted, then FIN), then what the client still sends is
// read and dropped until it closes, a second passes or 4 MiB arrived, so that no reset makes its
// kernel drop the reply unread. (intercept_h2.cpp's linger() uses it, then resets what a flooding
// client never read.)
asio::awaitable<void> linger_close(Session& s);
// How long, and how much of, what a client still sends after a refusal is read and dropped
// (linger_close, and intercept_h2.cpp's drain of a refused stream's body).
inline constexpr std::chrono::seconds kLingerTime{1};
inline constexpr std::size_t kLingerBytes = 4 << 20;

// One absolute-form http:// request and its response. Returns true when the client
// connection may carry another request.
// `head`: the validated head of this request; its parser is taken to read the body.
// `decision`: what policy decided for it (its rule goes into the audit line), or null.
// `secret_forms`: the attached credential's forms, which the response must not carry back.
// `body`: what the request body goes through (placeholder tripwire, chunks signed again), or
// null.
asio::awaitable<bool> handle_http(Session& s, http::RequestHead& head, const policy::Host& host,
                                  std::uint16_t port, const policy::Decision* decision = nullptr,
                                  const std::vector<std::string>* secret_forms = nullptr,
                                  RequestBody* body = nullptr);

}  // namespace sandgate::proxy
