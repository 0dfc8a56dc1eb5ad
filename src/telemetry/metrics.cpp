#include "telemetry/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>

namespace sandgate::telemetry {

namespace {

constexpr std::array<std::string_view, 3> kHoldActions = {"allow_once", "allow_sandbox", "deny"};

constexpr std::string_view kOther = "other";
constexpr std::array<Mode, kModeCount> kModes{Mode::http, Mode::connect, Mode::tls,
                                              Mode::tcp,  Mode::dns,     Mode::https};
constexpr std::array<Outcome, kOutcomeCount> kOutcomes{Outcome::allowed, Outcome::denied,
                                                       Outcome::error};
constexpr std::array<Side, kSideCount> kSides{Side::client, Side::upstream, Side::internal};

// Upper bounds in seconds, shared by every latency histogram.
const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  return buckets;
}

std::string_view side_name(Side s) {
  switch (s) {
    case Side::client:
      return "client";
    case Side::upstream:
      return "upstream";
    case Side::internal:
      return "internal";
  }
  return "internal";
}

// Appends "other" unless present, drops duplicates, and returns the label values in order
// together with a name -> index table sorted for binary search.
std::vector<std::pair<std::string, std::size_t>> make_lookup(std::vector<std::string>& values) {
  if (std::find(values.begin(), values.end(), kOther) == values.end()) {
    values.emplace_back(kOther);
  }
  std::vector<std::pair<std::string, std::size_t>> lookup;
  std::vector<std::string> unique;
  for (std::string& v : values) {
    if (std::find(unique.begin(), unique.end(), v) != unique.end()) continue;
    lookup.emplace_back(v, unique.size());
    unique.push_back(std::move(v));
  }
  values = std::move(unique);
  std::sort(lookup.begin(), lookup.end());
  return lookup;
}

std::size_t find_index(const std::vector<std::pair<std::string, std::size_t>>& lookup,
                       std::string_view key) noexcept {
  const auto it = std::lower_bound(
      lookup.begin(), lookup.end(), key,
      [](const std::pair<std::string, std::size_t>& e, std::string_view k) { return e.first < k; });
  if (it != lookup.end() && it->first == key) return it->second;
  return find_index(lookup, kOther);  // always present, so this recursion ends
}

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::string_view name(Mode m) {
  switch (m) {
    case Mode::http:
      return "http";
    case Mode::connect:
      return "connect";
    case Mode::tls:
      return "tls";
    case Mode::tcp:
      return "tcp";
    case Mode::dns:
      return "dns";
    case Mode::https:
      return "https";
  }
  return "tcp";
}

std::string_view name(Outcome o) {
  switch (o) {
    case Outcome::allowed:
      return "allowed";
    case Outcome::denied:
      return "denied";
    case Outcome::error:
      return "error";
  }
  return "error";
}

std::string_view name(Direction d) {
  return d == Direction::upstream ? "upstream" : "downstream";
}

std::string_view name(DnsResult r) {
  switch (r) {
    case DnsResult::ok:
      return "ok";
    case DnsResult::failed:
      return "failed";
    case DnsResult::cache_hit:
      return "cache_hit";
  }
  return "failed";
}

std::string_view name(AcceptFailure f) {
  switch (f) {
    case AcceptFailure::descriptors:
      return "descriptors";
    case AcceptFailure::memory:
      return "memory";
    case AcceptFailure::other:
      return "other";
  }
  return "other";
}

std::string_view name(AuthOutcome a) {
  switch (a) {
    case AuthOutcome::ok:
      return "ok";
    case AuthOutcome::no_credentials:
      return "no_credentials";
    case AuthOutcome::malformed_credentials:
      return "malformed_credentials";
    case AuthOutcome::unknown_sandbox_id:
      return "unknown_sandbox_id";
    case AuthOutcome::wrong_token:
      return "wrong_token";
    case AuthOutcome::identity_changed:
      return "identity_changed";
  }
  return "malformed_credentials";
}

std::vector<std::string> all_error_codes() {
  std::vector<std::string> codes;
  for (int e = static_cast<int>(Errc::ok) + 1; e <= static_cast<int>(Errc::internal_error); ++e) {
    codes.emplace_back(code_name(static_cast<Errc>(e)));
  }
  return codes;
}

Metrics::Metrics(std::string_view version, std::vector<std::string> denial_reasons,
                 std::vector<std::string> error_codes)
    : registry_(std::make_shared<prometheus::Registry>()),
      denial_lookup_(make_lookup(denial_reasons)),
      error_lookup_(make_lookup(error_codes)) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  auto& reg = *registry_;
  const auto label = [](std::string_view v) { return std::string(v); };

  auto& connections = BuildCounter()
                          .Name("sandgate_connections_total")
                          .Help("Client connections accepted, by mode and outcome.")
                          .Register(reg);
  auto& requests = BuildCounter()
                       .Name("sandgate_requests_total")
                       .Help("HTTP requests, keep-alive ones included, by mode and outcome.")
                       .Register(reg);
  for (const Mode m : kModes) {
    for (const Outcome o : kOutcomes) {
      const prometheus::Labels labels{{"mode", label(name(m))}, {"outcome", label(name(o))}};
      connections_[static_cast<std::size_t>(m)][static_cast<std::size_t>(o)] =
          &connections.Add(labels);
      requests_[static_cast<std::size_t>(m)][static_cast<std::size_t>(o)] = &requests.Add(labels);
    }
  }

  auto& denials = BuildCounter()
                      .Name("sandgate_denials_total")
                      .Help("Refused connections and requests, by reason.")
                      .Register(reg);
  for (const std::string& reason : denial_reasons) {
    denials_.push_back(&denials.Add({{"reason", reason}}));
  }

  auto& errors = BuildCounter()
                     .Name("sandgate_errors_total")
                     .Help("Failures by error code and the side blamed for them.")
                     .Register(reg);
  for (const std::string& code : error_codes) {
    auto& by_side = errors_.emplace_back();
    for (const Side s : kSides) {
      by_side[static_cast<std::size_t>(s)] =
          &errors.Add({{"code", code}, {"side", label(side_name(s))}});
    }
  }

  auto& bytes = BuildCounter()
                    .Name("sandgate_bytes_total")
                    .Help("Payload bytes relayed; upstream = client to destination.")
                    .Register(reg);
  for (const Direction d : {Direction::upstream, Direction::downstream}) {
    bytes_[static_cast<std::size_t>(d)] = &bytes.Add({{"direction", label(name(d))}});
  }

  active_tunnels_ = &BuildGauge()
                         .Name("sandgate_active_tunnels")
                         .Help("Tunnels (CONNECT, TLS, TCP) currently relaying.")
                         .Register(reg)
                         .Add({});
  held_requests_ = &BuildGauge()
                        .Name("sandgate_held_requests")
                        .Help("Requests waiting for an operator's answer (held destinations).")
                        .Register(reg)
                        .Add({});
  auto& answered = BuildCounter()
                       .Name("sandgate_holds_answered_total")
                       .Help("Held destinations an operator answered, by action.")
                       .Register(reg);
  for (std::size_t i = 0; i < kHoldActions.size(); ++i) {
    holds_answered_[i] = &answered.Add({{"action", std::string(kHoldActions[i])}});
  }
  active_connections_ = &BuildGauge()
                             .Name("sandgate_active_connections")
                             .Help("Client connections currently open.")
                             .Register(reg)
                             .Add({});

  auto& dns = BuildCounter()
                  .Name("sandgate_dns_lookups_total")
                  .Help("Destination name lookups, by result.")
                  .Register(reg);
  for (const DnsResult r : {DnsResult::ok, DnsResult::failed, DnsResult::cache_hit}) {
    dns_lookups_[static_cast<std::size_t>(r)] = &dns.Add({{"result", label(name(r))}});
  }
  dns_duration_ = &BuildHistogram()
                       .Name("sandgate_dns_lookup_duration_seconds")
                       .Help("Time to resolve a destination name, cache hits excluded.")
                       .Register(reg)
                       .Add({}, latency_buckets());
  connect_duration_ = &BuildHistogram()
                           .Name("sandgate_upstream_connect_duration_seconds")
                           .Help("Time to establish a TCP connection to the destination.")
                           .Register(reg)
                           .Add({}, latency_buckets());

  auto& accepts = BuildCounter()
                      .Name("sandgate_accept_failures_total")
                      .Help("Failed accept(2) calls on a listener, by reason.")
                      .Register(reg);
  for (const AcceptFailure f :
       {AcceptFailure::descriptors, AcceptFailure::memory, AcceptFailure::other}) {
    accept_failures_[static_cast<std::size_t>(f)] = &accepts.Add({{"reason", label(name(f))}});
  }

  auto& auth = BuildCounter()
                   .Name("sandgate_proxy_auth_total")
                   .Help(
                       "Explicit-proxy Proxy-Authorization checks, by outcome; no_credentials "
                       "is the challenge clients expect before sending any.")
                   .Register(reg);
  for (std::size_t a = 0; a < kAuthOutcomeCount; ++a) {
    proxy_auth_[a] = &auth.Add({{"outcome", label(name(static_cast<AuthOutcome>(a)))}});
  }

  audit_failures_ = &BuildCounter()
                         .Name("sandgate_audit_log_write_failures_total")
                         .Help("Audit log lines lost: queue full, failed write or reopen.")
                         .Register(reg)
                         .Add({});

  audit_suppressed_ = &BuildCounter()
                           .Name("sandgate_audit_lines_suppressed_total")
                           .Help(
                               "Audit lines left out by a burst limit (each burst ends in one "
                               "summary line carrying the count).")
                           .Register(reg)
                           .Add({});

  auto& tls_failures = BuildCounter()
                           .Name("sandgate_interception_tls_failures_total")
                           .Help("Failed TLS handshakes of intercepted streams, by side.")
                           .Register(reg);
  for (const Side side : kSides) {
    interception_tls_failures_[static_cast<std::size_t>(side)] =
        &tls_failures.Add({{"side", label(side_name(side))}});
  }
  const auto leaf_counter = [&](const char* metric, const char* help) {
    return &BuildCounter().Name(metric).Help(help).Register(reg).Add({});
  };
  leaf_hits_ = leaf_counter("sandgate_interception_leaf_cache_hits_total",
                            "Intercepted connections served a cached leaf certificate.");
  leaf_misses_ = leaf_counter("sandgate_interception_leaf_cache_misses_total",
                              "Intercepted connections that waited for a leaf to be minted.");
  leaf_mints_ = leaf_counter("sandgate_interception_leaf_mints_total",
                             "Leaf certificates minted by the interception CA.");
  leaf_mint_failures_ = leaf_counter("sandgate_interception_leaf_mint_failures_total",
                                     "Leaf certificates that could not be minted.");
  leaf_entries_ = &BuildGauge()
                       .Name("sandgate_interception_leaf_cache_entries")
                       .Help("Leaf certificates cached now.")
                       .Register(reg)
                       .Add({});

  credential_refreshes_ = &BuildCounter()
                               .Name("sandgate_credential_refreshes_total")
                               .Help("Token fetches started, per credential and provider.")
                               .Register(reg);
  credential_failures_ = &BuildCounter()
                              .Name("sandgate_credential_refresh_failures_total")
                              .Help("Token fetches that failed, per credential and provider.")
                              .Register(reg);
  credential_expiry_ = &BuildGauge()
                            .Name("sandgate_credential_expiry_seconds")
                            .Help(
                                "Seconds until the soonest-expiring cached token of each "
                                "credential expires.")
                            .Register(reg);
  credential_cache_entries_ =
      &BuildGauge()
           .Name("sandgate_credential_token_cache_entries")
           .Help("Entries of each credential's token cache (one per scope asked for).")
           .Register(reg);
  upstream_pool_ = &BuildGauge()
                        .Name("sandgate_upstream_pool_connections")
                        .Help("Idle upstream connections of intercepted streams kept for reuse.")
                        .Register(reg)
                        .Add({});

  BuildGauge()
      .Name("sandgate_build_info")
      .Help("Always 1; the version label identifies the running build.")
      .Register(reg)
      .Add({{"version", label(version)}})
      .Set(1);
}

Metrics::~Metrics() = default;

void Metrics::audit_suppressed(std::uint64_t n) noexcept {
  audit_suppressed_->Increment(static_cast<double>(n));
}

void Metrics::connection(Mode m, Outcome o) noexcept {
  connections_[static_cast<std::size_t>(m)][static_cast<std::size_t>(o)]->Increment();
}

void Metrics::request(Mode m, Outcome o) noexcept {
  requests_[static_cast<std::size_t>(m)][static_cast<std::size_t>(o)]->Increment();
}

std::size_t Metrics::denial_index(std::string_view reason) const noexcept {
  return find_index(denial_lookup_, reason);
}

void Metrics::denial(std::size_t reason_index) noexcept {
  denials_[std::min(reason_index, denials_.size() - 1)]->Increment();
}

std::size_t Metrics::error_index(std::string_view code) const noexcept {
  return find_index(error_lookup_, code);
}

void Metrics::error(std::size_t code_index, Side side) noexcept {
  errors_[std::min(code_index, errors_.size() - 1)][static_cast<std::size_t>(side)]->Increment();
}

void Metrics::bytes(Direction d, std::uint64_t n) noexcept {
  bytes_[static_cast<std::size_t>(d)]->Increment(static_cast<double>(n));
}

void Metrics::hold_answered(std::string_view action) noexcept {
  for (std::size_t i = 0; i < kHoldActions.size(); ++i) {
    if (kHoldActions[i] == action) holds_answered_[i]->Increment();
  }
}

void Metrics::connection_opened() noexcept {
  active_connections_->Increment();
}
void Metrics::connection_closed() noexcept {
  active_connections_->Decrement();
}
void Metrics::tunnel_opened() noexcept {
  active_tunnels_->Increment();
}
void Metrics::tunnel_closed() noexcept {
  active_tunnels_->Decrement();
}

void Metrics::accept_failure(AcceptFailure f) noexcept {
  accept_failures_[static_cast<std::size_t>(f)]->Increment();
}

void Metrics::proxy_auth(AuthOutcome a) noexcept {
  proxy_auth_[static_cast<std::size_t>(a)]->Increment();
}

void Metrics::dns_lookup(DnsResult r) noexcept {
  dns_lookups_[static_cast<std::size_t>(r)]->Increment();
}

void Metrics::dns_lookup_duration(std::chrono::nanoseconds d) noexcept {
  dns_duration_->Observe(seconds(d));
}

void Metrics::upstream_connect_duration(std::chrono::nanoseconds d) noexcept {
  connect_duration_->Observe(seconds(d));
}

void Metrics::set_audit_failures_source(std::function<std::uint64_t()> source) {
  const std::lock_guard lock(audit_mutex_);
  audit_source_ = std::move(source);
}

void Metrics::interception_tls_failure(Side side) noexcept {
  interception_tls_failures_[static_cast<std::size_t>(side)]->Increment();
}

void Metrics::set_leaf_counts_source(std::function<LeafCounts()> source) {
  const std::lock_guard lock(audit_mutex_);
  leaf_source_ = std::move(source);
}

void Metrics::set_credentials_source(std::function<std::vector<CredentialCounts>()> source) {
  const std::lock_guard lock(audit_mutex_);
  credentials_source_ = std::move(source);
}

std::string Metrics::serialize() const {
  {
    const std::lock_guard lock(audit_mutex_);
    if (credentials_source_) {
      for (const CredentialCounts& c : credentials_source_()) {
        CredentialSeen& seen = credentials_seen_[c.name];
        const prometheus::Labels labels{{"credential", c.name}, {"provider", c.provider}};
        auto& refreshes = credential_refreshes_->Add(labels);
        auto& failures = credential_failures_->Add(labels);
        // The store counts from zero again for a credential a reload changed.
        if (c.refreshes < seen.refreshes || c.failures < seen.failures) seen = {0, 0, seen.expiry};
        refreshes.Increment(static_cast<double>(c.refreshes - seen.refreshes));
        failures.Increment(static_cast<double>(c.failures - seen.failures));
        seen.refreshes = c.refreshes;
        seen.failures = c.failures;
        credential_cache_entries_->Add({{"credential", c.name}})
            .Set(static_cast<double>(c.cache_entries));
        if (c.seconds_to_expiry) {
          if (seen.expiry == nullptr)
            seen.expiry = &credential_expiry_->Add({{"credential", c.name}});
          seen.expiry->Set(*c.seconds_to_expiry);
        } else if (seen.expiry != nullptr) {
          credential_expiry_->Remove(seen.expiry);
          seen.expiry = nullptr;
        }
      }
    }
    if (leaf_source_) {
      const LeafCounts now = leaf_source_();
      const auto advance = [](prometheus::Counter* c, std::uint64_t to, std::uint64_t& was) {
        if (to > was) c->Increment(static_cast<double>(to - was));
        was = std::max(was, to);
      };
      advance(leaf_hits_, now.hits, leaf_counted_.hits);
      advance(leaf_misses_, now.misses, leaf_counted_.misses);
      advance(leaf_mints_, now.mints, leaf_counted_.mints);
      advance(leaf_mint_failures_, now.mint_failures, leaf_counted_.mint_failures);
      leaf_entries_->Set(static_cast<double>(now.entries));
    }
    if (audit_source_) {
      const std::uint64_t now = audit_source_();
      if (now > audit_counted_) {
        audit_failures_->Increment(static_cast<double>(now - audit_counted_));
        audit_counted_ = now;
      }
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::upstream_pool_changed(double delta) noexcept {
  upstream_pool_->Increment(delta);
}

Metrics::Active::Active(prometheus::Gauge* gauge) noexcept : gauge_(gauge) {
  if (gauge_ != nullptr) gauge_->Increment();
}

Metrics::Active& Metrics::Active::operator=(Active&& other) noexcept {
  if (this != &other) {
    if (gauge_ != nullptr) gauge_->Decrement();
    gauge_ = std::exchange(other.gauge_, nullptr);
  }
  return *this;
}

Metrics::Active::~Active() {
  if (gauge_ != nullptr) gauge_->Decrement();
}

}  // namespace sandgate::telemetry
