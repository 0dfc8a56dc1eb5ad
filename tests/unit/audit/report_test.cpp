// The aggregation core, event by event: grouping, filters, suggestions, bounds, series.
#include "audit/report.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace sandgate::audit {
namespace {

constexpr std::int64_t kT0 = 1'796'169'600'000;  // 2026-12-02T00:00:00Z
constexpr std::int64_t kMinute = 60'000;

AuditEvent denial(std::int64_t t, std::string_view sandbox, std::string_view host,
                  std::uint16_t port, std::string_view reason = "no_matching_rule") {
  AuditEvent e;
  e.time_ms = t;
  e.code = "SANDBOX_NETWORK_DENIED";
  e.outcome = "failure";
  e.sandbox = sandbox;
  e.host = host;
  e.port = port;
  e.reason = reason;
  e.protocol = "connect";
  return e;
}

AuditEvent tunnel(std::int64_t t, std::string_view sandbox, std::string_view host, std::uint64_t up,
                  std::uint64_t down) {
  AuditEvent e;
  e.time_ms = t;
  e.code = "connection_closed";
  e.outcome = "success";
  e.sandbox = sandbox;
  e.host = host;
  e.port = 443;
  e.bytes_up = up;
  e.bytes_down = down;
  return e;
}

AuditEvent failure(std::int64_t t, std::string_view sandbox, std::string_view code) {
  AuditEvent e;
  e.time_ms = t;
  e.code = code;
  e.outcome = "failure";
  e.sandbox = sandbox;
  e.host = "down.example";
  e.port = 443;
  return e;
}

TEST(AuditAggregator, GroupsDenialsBySandboxHostPortAndReason) {
  Aggregator a{Filter{}};
  // Out of order, as lines of several files are.
  a.add(denial(kT0 + 5 * kMinute, "sb1", "evil.example", 443));
  a.add(denial(kT0 + 1 * kMinute, "sb1", "evil.example", 443));
  a.add(denial(kT0 + 9 * kMinute, "sb1", "evil.example", 443));
  a.add(denial(kT0, "sb1", "evil.example", 80));
  a.add(denial(kT0, "sb1", "evil.example", 443, "denied_by_rule"));
  a.add(denial(kT0, "sb2", "evil.example", 443));
  const Report r = a.take_report(10);
  ASSERT_EQ(r.denials.size(), 4u);
  const DenialGroup& top = r.denials[0];
  EXPECT_EQ(top.sandbox, "sb1");
  EXPECT_EQ(top.host, "evil.example");
  EXPECT_EQ(top.port, 443);
  EXPECT_EQ(top.reason, "no_matching_rule");
  EXPECT_EQ(top.count, 3u);
  EXPECT_EQ(top.first_ms, kT0 + kMinute);
  EXPECT_EQ(top.last_ms, kT0 + 9 * kMinute);
  EXPECT_EQ(top.protocols, std::vector<std::string>{"connect"});
  EXPECT_EQ(r.denials[3].sandbox, "sb2");
  EXPECT_EQ(r.lines, 6u);
  EXPECT_EQ(r.matched, 6u);
  EXPECT_EQ(r.first_ms, kT0);
  EXPECT_EQ(r.last_ms, kT0 + 9 * kMinute);
  ASSERT_EQ(r.sandboxes.size(), 2u);
  EXPECT_EQ(r.sandboxes[0].denied, 5u);
}

template <class T>
Filter filter_with(T Filter::*member, T value) {
  Filter f;
  f.*member = std::move(value);
  return f;
}

template <class T>
Limits limits_with(T Limits::*member, T value) {
  Limits l;
  l.*member = value;
  return l;
}

struct FilterRow {
  const char* name;
  Filter filter;
  std::uint64_t matched;
};

TEST(AuditAggregator, Filters) {
  const std::vector<AuditEvent> events = {
      denial(kT0, "sb1", "api.evil.example", 443),           //
      denial(kT0 + kMinute, "sb2", "EVIL.example", 443),     //
      tunnel(kT0 + 2 * kMinute, "sb1", "github.com", 1, 2),  //
      failure(kT0 + 3 * kMinute, "", "PROXY_AUTH_REQUIRED"),
  };
  Filter since;
  since.since_ms = kT0 + kMinute;
  Filter until;
  until.until_ms = kT0 + kMinute;
  Filter window;
  window.since_ms = kT0 + kMinute;
  window.until_ms = kT0 + 3 * kMinute;
  const std::vector<FilterRow> rows = {
      {"none", Filter{}, 4},
      {"one sandbox", filter_with(&Filter::sandboxes, std::vector<std::string>{"sb1"}), 2},
      {"two sandboxes", filter_with(&Filter::sandboxes, std::vector<std::string>{"sb1", "sb2"}), 3},
      {"lines without a sandbox", filter_with(&Filter::sandboxes, std::vector<std::string>{""}), 1},
      {"code", filter_with(&Filter::codes, std::vector<std::string>{"PROXY_AUTH_REQUIRED"}), 1},
      {"codes",
       filter_with(&Filter::codes,
                   std::vector<std::string>{"PROXY_AUTH_REQUIRED", "connection_closed"}),
       2},
      {"exact host, any case",
       filter_with(&Filter::hosts, std::vector<std::string>{"evil.example"}), 1},
      {"wildcard host: subdomains, not the apex",
       filter_with(&Filter::hosts, std::vector<std::string>{"*.evil.example"}), 1},
      {"hosts",
       filter_with(&Filter::hosts, std::vector<std::string>{"*.evil.example", "github.com"}), 2},
      {"denied only", filter_with(&Filter::denied_only, true), 2},
      {"since is inclusive", since, 3},
      {"until is exclusive", until, 1},
      {"window", window, 2},
  };
  for (const FilterRow& row : rows) {
    Aggregator a{row.filter};
    for (const AuditEvent& e : events) a.add(e);
    const Report r = a.take_report(10);
    EXPECT_EQ(r.lines, 4u) << row.name;
    EXPECT_EQ(r.matched, row.matched) << row.name;
  }
}

TEST(AuditAggregator, TakesTheLogsSuggestionElseDerivesOne) {
  Aggregator a{Filter{}};
  AuditEvent logged = denial(kT0, "launched", "npm.example", 443);
  a.add(logged);  // the first line has none: derived
  logged.suggestion = "[profiles.dev] allow = [\"npm.example:443\"]";
  a.add(logged);  // a later one has the daemon's: it wins
  a.add(denial(kT0, "sb1", "x.example", 8443));
  a.add(denial(kT0, "sb1", "10.1.2.3", 443, "ip_literal_not_allowed"));
  a.add(denial(kT0, "sb1", "169.254.169.254", 80, "always_denied_address"));
  a.add(denial(kT0, "sb1",
               "\xE2\x80\xA6"
               "a.evil.example",
               443));  // shortened: not a name
  a.add(denial(kT0, "sb1", "git.example", 443, "not_a_reason"));
  a.add(denial(kT0, "", "y.example", 443, "unknown_sandbox"));
  AuditEvent dns = denial(kT0, "sb1", "dns.example", 0);
  dns.protocol = "dns";
  a.add(dns);  // a question names no port: the name on the sandbox's ports, never port 0
  const Report r = a.take_report(10);
  std::map<std::string, const DenialGroup*> by_host;
  for (const DenialGroup& g : r.denials) by_host[g.host] = &g;
  ASSERT_EQ(by_host.size(), 8u);
  EXPECT_EQ(by_host["dns.example"]->suggestion, "[sandboxes.sb1] allow = [\"dns.example\"]");
  EXPECT_EQ(by_host["y.example"]->suggestion, "");  // no sandbox to place it in
  EXPECT_EQ(by_host["npm.example"]->suggestion, "[profiles.dev] allow = [\"npm.example:443\"]");
  EXPECT_EQ(by_host["npm.example"]->suggestion_source, SuggestionSource::log);
  EXPECT_EQ(by_host["x.example"]->suggestion, "[sandboxes.sb1] allow = [\"x.example:8443\"]");
  EXPECT_EQ(by_host["x.example"]->suggestion_source, SuggestionSource::derived);
  EXPECT_EQ(by_host["10.1.2.3"]->suggestion, "[sandboxes.sb1] allow_cidrs = [\"10.1.2.3/32\"]");
  EXPECT_EQ(by_host["169.254.169.254"]->suggestion, "");
  EXPECT_EQ(by_host["169.254.169.254"]->suggestion_source, SuggestionSource::none);
  EXPECT_EQ(by_host["\xE2\x80\xA6"
                    "a.evil.example"]
                ->suggestion,
            "");
  EXPECT_EQ(by_host["git.example"]->suggestion, "");
}

TEST(AuditAggregator, PlacesDerivedSuggestionsWithThePlacer) {
  // As config::home_of places them: a launched sandbox by its profile; one the config does
  // not have (its drop-in removed) as a launched one without a profile, never by its id.
  const Placer placer = [](std::string_view sandbox) {
    policy::SandboxHome home;
    home.id = sandbox;
    home.kind = sandbox == "known" ? policy::SandboxHome::Kind::launched
                                   : policy::SandboxHome::Kind::unknown;
    if (sandbox == "known") home.profile = "p";
    return home;
  };
  Aggregator a{Filter{}, Limits{}, placer};
  a.add(denial(kT0, "known", "x.example", 443));
  a.add(denial(kT0, "gone", "x.example", 443));
  a.add(denial(kT0, "gone", "10.1.2.3", 443, "ip_literal_not_allowed"));
  const Report r = a.take_report(10);
  ASSERT_EQ(r.denials.size(), 3u);
  std::map<std::string, const DenialGroup*> by;
  for (const DenialGroup& g : r.denials) by[g.sandbox + " " + g.host] = &g;
  EXPECT_EQ(by["gone x.example"]->suggestion, "sandgate-launch --allow \"x.example:443\"");
  EXPECT_EQ(by["gone x.example"]->suggestion_source, SuggestionSource::config);
  EXPECT_EQ(by["gone 10.1.2.3"]->suggestion,
            "[profiles.NAME] allow_cidrs = [\"10.1.2.3/32\"] (sandgate-launch --profile NAME)");
  EXPECT_EQ(by["known x.example"]->suggestion, "[profiles.p] allow = [\"x.example:443\"]");
  EXPECT_EQ(by["known x.example"]->suggestion_source, SuggestionSource::config);
}

TEST(AuditAggregator, BoundsTheGroupsItKeeps) {
  Aggregator a{Filter{}, limits_with(&Limits::max_groups, std::size_t{2})};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      const std::string host = "h" + std::to_string(i) + ".example";
      a.add(denial(kT0 + i, "sb", host, 443));
    }
  }
  const Report r = a.take_report(10);
  ASSERT_EQ(r.denials.size(), 2u);
  EXPECT_EQ(r.denials[0].count, 3u);  // kept groups go on counting
  EXPECT_EQ(r.denial_overflow.lines, 24u);
  EXPECT_EQ(r.denial_overflow.groups, 8u);  // the estimate is exact at this size
  EXPECT_EQ(r.destinations, 2u);
  EXPECT_EQ(r.destination_overflow.lines, 24u);
  EXPECT_EQ(r.sandboxes.size(), 1u);
  EXPECT_EQ(r.sandboxes[0].denied, 30u);  // totals still count every line
}

TEST(AuditAggregator, TopDestinationsByBytesAndByConnections) {
  Aggregator a{Filter{}};
  a.add(tunnel(kT0, "sb", "big.example", 10, 1'000'000));
  for (int i = 0; i < 5; ++i) a.add(tunnel(kT0, "sb", "chatty.example", 1, 1));
  a.add(tunnel(kT0, "sb", "b.example", 5, 5));
  a.add(tunnel(kT0, "sb", "a.example", 5, 5));
  a.add(denial(kT0, "sb", "denied.example", 443));
  const Report r = a.take_report(3);
  ASSERT_EQ(r.top_by_bytes.size(), 3u);
  EXPECT_EQ(r.top_by_bytes[0].host, "big.example");
  EXPECT_EQ(r.top_by_bytes[0].bytes(), 1'000'010u);
  EXPECT_EQ(r.top_by_bytes[1].host, "a.example");  // a tie goes by name
  EXPECT_EQ(r.top_by_bytes[2].host, "b.example");
  ASSERT_EQ(r.top_by_connections.size(), 3u);
  EXPECT_EQ(r.top_by_connections[0].host, "chatty.example");
  EXPECT_EQ(r.top_by_connections[0].connections, 5u);
  EXPECT_EQ(r.destinations, 5u);
}

TEST(AuditAggregator, ErrorCodesBySide) {
  Aggregator a{Filter{}};
  a.add(failure(kT0, "sb", "UPSTREAM_CONNECT_FAILED"));
  a.add(failure(kT0 + 1, "sb", "UPSTREAM_CONNECT_FAILED"));
  a.add(failure(kT0, "sb", "MALFORMED_REQUEST"));
  a.add(failure(kT0, "sb", "LOCAL_RESOURCES_EXHAUSTED"));
  a.add(failure(kT0, "sb", "SOMETHING_NEW"));
  a.add(denial(kT0, "sb", "x.example", 443));
  a.add(tunnel(kT0, "sb", "x.example", 1, 1));
  AuditEvent cut = tunnel(kT0, "sb", "x.example", 1, 1);
  cut.code = "http_request";
  cut.outcome = "failure";  // the client went away: not an error code
  a.add(cut);
  const Report r = a.take_report(10);
  std::map<std::string, std::pair<std::string, std::uint64_t>> by_code;
  for (const ErrorGroup& e : r.errors) by_code[e.code] = {e.side, e.count};
  const std::map<std::string, std::pair<std::string, std::uint64_t>> want = {
      {"UPSTREAM_CONNECT_FAILED", {"upstream", 2}},   {"MALFORMED_REQUEST", {"client", 1}},
      {"LOCAL_RESOURCES_EXHAUSTED", {"internal", 1}}, {"SOMETHING_NEW", {"unknown", 1}},
      {"SANDBOX_NETWORK_DENIED", {"policy", 1}},
  };
  EXPECT_EQ(by_code, want);
  EXPECT_EQ(r.sandboxes[0].connections, 2u);
  EXPECT_EQ(r.sandboxes[0].errors, 5u);
}

TEST(AuditAggregator, CredentialsPerHost) {
  Aggregator a{Filter{}};
  AuditEvent e = tunnel(kT0, "sb", "api.github.com", 1, 1);
  e.code = "http_request";
  e.credential_name = "github-app";
  e.credential_fingerprint = "sha256:aa";
  a.add(e);
  e.time_ms = kT0 + kMinute;
  a.add(e);
  e.credential_fingerprint = "sha256:bb";  // refreshed token
  a.add(e);
  a.add(tunnel(kT0, "sb", "api.github.com", 1, 1));  // without a credential
  const Report r = a.take_report(10);
  ASSERT_EQ(r.credentials.size(), 2u);
  EXPECT_EQ(r.credentials[0].host, "api.github.com");
  EXPECT_EQ(r.credentials[0].name, "github-app");
  EXPECT_EQ(r.credentials[0].fingerprint, "sha256:aa");
  EXPECT_EQ(r.credentials[0].count, 2u);
  EXPECT_EQ(r.credentials[0].first_ms, kT0);
  EXPECT_EQ(r.credentials[0].last_ms, kT0 + kMinute);
  EXPECT_EQ(r.credentials[1].fingerprint, "sha256:bb");
}

TEST(AuditAggregator, DenialSeriesWidenBucketsToStayBounded) {
  Aggregator a{Filter{}, limits_with(&Limits::max_time_buckets, std::size_t{4})};
  // Minute buckets at first; ten minutes of denials make them wider, keeping every count.
  for (int m = 0; m < 10; ++m) a.add(denial(kT0 + m * kMinute, "sb1", "x.example", 443));
  a.add(denial(kT0 + 9 * kMinute, "sb2", "x.example", 443));
  const Report r = a.take_report(10);
  ASSERT_EQ(r.series.size(), 2u);
  EXPECT_EQ(r.series[0].sandbox, "sb1");
  EXPECT_LE(r.series[0].counts.size(), 4u);
  EXPECT_EQ(r.series[0].counts.size(), r.series[1].counts.size());
  std::uint64_t total = 0;
  for (const std::uint64_t n : r.series[0].counts) total += n;
  EXPECT_EQ(total, 10u);
  EXPECT_EQ(r.series_width_ms, 4 * kMinute);
  EXPECT_LE(r.series_start_ms, kT0);
  EXPECT_GT(
      r.series_start_ms + static_cast<std::int64_t>(r.series[0].counts.size()) * r.series_width_ms,
      kT0 + 9 * kMinute);
  EXPECT_EQ(r.series[1].counts.back(), 1u);
}

TEST(AuditAggregator, CountsMalformedAndTooLongLines) {
  Aggregator a{Filter{}};
  a.add_malformed();
  a.add_malformed();
  a.add_too_long();
  const Report r = a.take_report(10);
  EXPECT_EQ(r.malformed, 2u);
  EXPECT_EQ(r.too_long, 1u);
  EXPECT_EQ(r.lines, 0u);
}

}  // namespace
}  // namespace sandgate::audit
