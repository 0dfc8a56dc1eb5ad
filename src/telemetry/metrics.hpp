#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/errc.hpp"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace sandgate::telemetry {

// How a client reached sandgate; also the audit log's network.protocol. https: a request
// inside a stream sandgate intercepted (TLS terminated with its own leaf).
enum class Mode : std::uint8_t { http, connect, tls, tcp, dns, https };
inline constexpr std::size_t kModeCount = 6;
// What became of a connection or request.
enum class Outcome : std::uint8_t { allowed, denied, error };
inline constexpr std::size_t kOutcomeCount = 3;
// upstream = client -> destination, downstream = destination -> client.
enum class Direction : std::uint8_t { upstream, downstream };
inline constexpr std::size_t kDirectionCount = 2;
enum class DnsResult : std::uint8_t { ok, failed, cache_hit };
inline constexpr std::size_t kDnsResultCount = 3;
// Why accept(2) on a listener failed: out of descriptors (EMFILE, ENFILE), out of memory
// (ENOBUFS, ENOMEM), or anything else.
enum class AcceptFailure : std::uint8_t { descriptors, memory, other };
inline constexpr std::size_t kAcceptFailureCount = 3;
// How an explicit-proxy request's Proxy-Authorization was judged (proxy::authenticate): the
// audit line's event.reason on a 407, and the sandgate_proxy_auth_total label. no_credentials
// is the challenge a client such as git (anyauth), curl --proxy-anyauth or Java expects
// before it sends any: not a failure. The others are: a malformed header (not Basic, not
// base64, no colon), an id no sandbox has, a known id with a wrong token, or a kept-alive
// connection naming another sandbox than the one it is bound to.
enum class AuthOutcome : std::uint8_t {
  ok,
  no_credentials,
  malformed_credentials,
  unknown_sandbox_id,
  wrong_token,
  identity_changed,
};
inline constexpr std::size_t kAuthOutcomeCount = 6;
inline constexpr std::size_t kSideCount = 3;  // sandgate::Side: client, upstream, internal

// The label values, also usable as audit log strings.
std::string_view name(Mode m);
std::string_view name(Outcome o);
std::string_view name(Direction d);
std::string_view name(DnsResult r);
std::string_view name(AcceptFailure f);
std::string_view name(AuthOutcome a);

// Every error code name from common/errc.hpp except "OK": the usual `error_codes` list.
std::vector<std::string> all_error_codes();

// All of sandgate's Prometheus metrics in one registry.
//
// Every label combination is created in the constructor and kept as a pointer in an array
// indexed by enum, so recording an event is an array index plus an atomic add: no map
// lookup, no lock (histograms take prometheus-cpp's internal per-histogram lock). Labels are
// bounded: no sandbox id, host or address ever becomes a label. Denial reasons and error
// codes come from fixed lists given at construction; a string not on its list is counted
// under "other". Thread-safe; share one instance.
class Metrics {
 public:
  Metrics(std::string_view version, std::vector<std::string> denial_reasons,
          std::vector<std::string> error_codes);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // sandgate_connections_total{mode, outcome}
  void connection(Mode m, Outcome o) noexcept;
  // sandgate_requests_total{mode, outcome}: each HTTP request, keep-alive ones included.
  void request(Mode m, Outcome o) noexcept;

  // sandgate_denials_total{reason}. Resolve a reason once with denial_index() to skip the
  // string lookup on the hot path; an unknown reason maps to the "other" slot.
  std::size_t denial_index(std::string_view reason) const noexcept;
  void denial(std::size_t reason_index) noexcept;
  void denial(std::string_view reason) noexcept { denial(denial_index(reason)); }

  // sandgate_errors_total{code, side}; same lookup scheme as denials.
  std::size_t error_index(std::string_view code) const noexcept;
  void error(std::size_t code_index, Side side) noexcept;
  void error(std::string_view code, Side side) noexcept { error(error_index(code), side); }
  void error(Errc e) noexcept { error(code_name(e), side_of(e)); }

  // sandgate_audit_lines_suppressed_total: lines a burst limit left out of the audit log
  // (each burst is summarised in one line that carries the count).
  void audit_suppressed(std::uint64_t n = 1) noexcept;

  // sandgate_bytes_total{direction}
  void bytes(Direction d, std::uint64_t n) noexcept;

  // sandgate_active_connections / sandgate_active_tunnels. Prefer the Active guard, which
  // cannot leak a count on an early return.
  void connection_opened() noexcept;
  void connection_closed() noexcept;
  void tunnel_opened() noexcept;
  void tunnel_closed() noexcept;

  // sandgate_dns_lookups_total{result}. Observe a duration only for real lookups, not
  // cache hits, so the histogram describes the resolver.
  void dns_lookup(DnsResult r) noexcept;
  // sandgate_dns_lookup_duration_seconds
  void dns_lookup_duration(std::chrono::nanoseconds d) noexcept;
  // sandgate_upstream_connect_duration_seconds
  void upstream_connect_duration(std::chrono::nanoseconds d) noexcept;

  // sandgate_accept_failures_total{reason}: a listener's accept(2) failed (the connection
  // waits in the backlog; the listener backs off and retries).
  void accept_failure(AcceptFailure f) noexcept;

  // sandgate_proxy_auth_total{outcome}: each explicit-proxy request's Proxy-Authorization
  // check, by outcome (never a sandbox id).
  void proxy_auth(AuthOutcome a) noexcept;

  // sandgate_audit_log_write_failures_total is read at scrape time: serialize() calls the
  // source (normally [&log] { return log.write_failures(); }) and advances the counter to
  // its value. Without a source the counter stays 0. Call once at startup.
  void set_audit_failures_source(std::function<std::uint64_t()> source);

  // sandgate_interception_tls_failures_total{side}: TLS handshakes of intercepted streams
  // that failed, with the client (it refused sandgate's leaf) or the upstream (its
  // certificate did not verify, or the handshake broke).
  void interception_tls_failure(Side side) noexcept;
  // sandgate_interception_leaf_cache_{hits,misses}_total, _leaf_mints_total,
  // _leaf_mint_failures_total and the _leaf_cache_entries gauge, read at scrape time from
  // the leaf cache like the audit failures. Call once at startup when interception is on.
  struct LeafCounts {
    std::uint64_t hits = 0, misses = 0, mints = 0, mint_failures = 0;
    std::size_t entries = 0;
  };
  void set_leaf_counts_source(std::function<LeafCounts()> source);
  // sandgate_credential_refreshes_total{credential,provider},
  // sandgate_credential_refresh_failures_total{credential,provider} and
  // sandgate_credential_expiry_seconds{credential} (the soonest-expiring cached token; absent
  // when none is cached or it never expires) and sandgate_credential_token_cache_entries
  // {credential} (one per scope asked for), read at scrape time from the credential store.
  // No per-sandbox label.
  struct CredentialCounts {
    std::string name;
    std::string provider;
    std::uint64_t refreshes = 0, failures = 0;
    std::optional<double> seconds_to_expiry;
    std::size_t cache_entries = 0;
  };
  void set_credentials_source(std::function<std::vector<CredentialCounts>()> source);

  // Prometheus text exposition format (0.0.4) of every metric.
  std::string serialize() const;

  // For wiring extra collectors; the families above are already registered.
  const std::shared_ptr<prometheus::Registry>& registry() const noexcept { return registry_; }

  // Holds one unit of an active gauge from construction to destruction. Move-only.
  class Active {
   public:
    Active() = default;
    explicit Active(prometheus::Gauge* gauge) noexcept;
    Active(Active&& other) noexcept : gauge_(std::exchange(other.gauge_, nullptr)) {}
    Active& operator=(Active&& other) noexcept;
    ~Active();

   private:
    prometheus::Gauge* gauge_ = nullptr;
  };
  [[nodiscard]] Active active_connection() noexcept { return Active(active_connections_); }
  [[nodiscard]] Active active_tunnel() noexcept { return Active(active_tunnels_); }
  // sandgate_held_requests: requests waiting for an operator's answer (held destinations).
  [[nodiscard]] Active held_request() noexcept { return Active(held_requests_); }
  // sandgate_holds_answered_total{action}: holds an operator answered (allow_once,
  // allow_sandbox, deny); expired ones are sandgate_denials_total{reason="hold_expired"}.
  void hold_answered(std::string_view action) noexcept;

  // sandgate_upstream_pool_connections: idle upstream connections kept by every worker's
  // UpstreamPool; each pool adds what it takes in and subtracts what it lets go.
  void upstream_pool_changed(double delta) noexcept;

 private:
  using ByModeOutcome = std::array<std::array<prometheus::Counter*, kOutcomeCount>, kModeCount>;

  std::shared_ptr<prometheus::Registry> registry_;
  ByModeOutcome connections_{};
  ByModeOutcome requests_{};
  // Label lists as given plus "other" last; lookup tables sorted by name for binary search.
  std::vector<prometheus::Counter*> denials_;
  std::vector<std::pair<std::string, std::size_t>> denial_lookup_;
  std::vector<std::array<prometheus::Counter*, kSideCount>> errors_;
  std::vector<std::pair<std::string, std::size_t>> error_lookup_;
  std::array<prometheus::Counter*, kDirectionCount> bytes_{};
  prometheus::Gauge* active_connections_ = nullptr;
  prometheus::Gauge* active_tunnels_ = nullptr;
  prometheus::Gauge* held_requests_ = nullptr;
  std::array<prometheus::Counter*, 3> holds_answered_{};
  std::array<prometheus::Counter*, kDnsResultCount> dns_lookups_{};
  prometheus::Histogram* dns_duration_ = nullptr;
  prometheus::Histogram* connect_duration_ = nullptr;
  std::array<prometheus::Counter*, kAcceptFailureCount> accept_failures_{};
  std::array<prometheus::Counter*, kAuthOutcomeCount> proxy_auth_{};
  prometheus::Counter* audit_failures_ = nullptr;
  prometheus::Counter* audit_suppressed_ = nullptr;
  std::array<prometheus::Counter*, kSideCount> interception_tls_failures_{};
  prometheus::Counter* leaf_hits_ = nullptr;
  prometheus::Counter* leaf_misses_ = nullptr;
  prometheus::Counter* leaf_mints_ = nullptr;
  prometheus::Counter* leaf_mint_failures_ = nullptr;
  prometheus::Gauge* leaf_entries_ = nullptr;
  prometheus::Gauge* upstream_pool_ = nullptr;

  mutable std::mutex audit_mutex_;  // guards the source and what was already counted
  std::function<std::uint64_t()> audit_source_;
  mutable std::uint64_t audit_counted_ = 0;
  std::function<LeafCounts()> leaf_source_;                            // guarded by audit_mutex_
  std::function<std::vector<CredentialCounts>()> credentials_source_;  // likewise
  prometheus::Family<prometheus::Counter>* credential_refreshes_ = nullptr;
  prometheus::Family<prometheus::Counter>* credential_failures_ = nullptr;
  prometheus::Family<prometheus::Gauge>* credential_expiry_ = nullptr;
  prometheus::Family<prometheus::Gauge>* credential_cache_entries_ = nullptr;
  struct CredentialSeen {
    std::uint64_t refreshes = 0, failures = 0;
    prometheus::Gauge* expiry = nullptr;
  };
  mutable std::map<std::string, CredentialSeen> credentials_seen_;
  mutable LeafCounts leaf_counted_;
};

}  // namespace sandgate::telemetry
