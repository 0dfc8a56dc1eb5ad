#include "telemetry/metrics.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sandgate::telemetry {
namespace {

using namespace std::chrono_literals;

Metrics make_metrics() {
  return Metrics("1.2.3", {"no_matching_rule", "denied_by_rule", "private_address"},
                 all_error_codes());
}

// The value of one sample line ("name{labels} value"), or nullopt if the series is absent.
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

TEST(Metrics, EveryFamilyHasHelpAndType) {
  const Metrics metrics = make_metrics();
  const std::string text = metrics.serialize();
  struct Row {
    std::string name;
    std::string type;
  };
  const std::vector<Row> rows = {
      {"sandgate_connections_total", "counter"},
      {"sandgate_requests_total", "counter"},
      {"sandgate_denials_total", "counter"},
      {"sandgate_errors_total", "counter"},
      {"sandgate_bytes_total", "counter"},
      {"sandgate_active_tunnels", "gauge"},
      {"sandgate_active_connections", "gauge"},
      {"sandgate_dns_lookups_total", "counter"},
      {"sandgate_dns_lookup_duration_seconds", "histogram"},
      {"sandgate_upstream_connect_duration_seconds", "histogram"},
      {"sandgate_audit_log_write_failures_total", "counter"},
      {"sandgate_proxy_auth_total", "counter"},
      {"sandgate_upstream_pool_connections", "gauge"},
      {"sandgate_build_info", "gauge"},
  };
  for (const Row& row : rows) {
    EXPECT_NE(text.find("# HELP " + row.name + " "), std::string::npos) << row.name;
    EXPECT_NE(text.find("# TYPE " + row.name + " " + row.type + "\n"), std::string::npos)
        << row.name;
  }
}

TEST(Metrics, EveryLabelCombinationExistsUpFront) {
  const Metrics metrics = make_metrics();
  const std::string text = metrics.serialize();
  const std::vector<std::string> series = {
      R"(sandgate_connections_total{mode="http",outcome="allowed"})",
      R"(sandgate_connections_total{mode="dns",outcome="error"})",
      R"(sandgate_requests_total{mode="connect",outcome="denied"})",
      R"(sandgate_denials_total{reason="private_address"})",
      R"(sandgate_denials_total{reason="other"})",
      R"(sandgate_errors_total{code="UPSTREAM_TIMEOUT",side="client"})",
      R"(sandgate_errors_total{code="INTERNAL_ERROR",side="internal"})",
      R"(sandgate_errors_total{code="other",side="upstream"})",
      R"(sandgate_bytes_total{direction="downstream"})",
      R"(sandgate_dns_lookups_total{result="cache_hit"})",
      R"(sandgate_proxy_auth_total{outcome="ok"})",
      R"(sandgate_proxy_auth_total{outcome="no_credentials"})",
      R"(sandgate_proxy_auth_total{outcome="malformed_credentials"})",
      R"(sandgate_proxy_auth_total{outcome="unknown_sandbox_id"})",
      R"(sandgate_proxy_auth_total{outcome="wrong_token"})",
      R"(sandgate_proxy_auth_total{outcome="identity_changed"})",
      "sandgate_active_tunnels",
      "sandgate_audit_log_write_failures_total",
  };
  for (const std::string& s : series) EXPECT_EQ(sample(text, s), 0.0) << s;
  EXPECT_EQ(sample(text, R"(sandgate_build_info{version="1.2.3"})"), 1.0);
  EXPECT_EQ(text.find("code=\"OK\""), std::string::npos);
}

TEST(Metrics, CountersIncrease) {
  Metrics metrics = make_metrics();
  metrics.connection(Mode::connect, Outcome::denied);
  metrics.connection(Mode::connect, Outcome::denied);
  metrics.request(Mode::http, Outcome::allowed);
  metrics.denial("denied_by_rule");
  metrics.denial(metrics.denial_index("denied_by_rule"));
  metrics.denial("not_on_the_list");
  metrics.error(Errc::upstream_dns_failed);
  metrics.error("UPSTREAM_TIMEOUT", Side::upstream);
  metrics.error("NOT_A_CODE", Side::internal);
  metrics.bytes(Direction::upstream, 1000);
  metrics.bytes(Direction::upstream, 24);
  metrics.dns_lookup(DnsResult::cache_hit);
  metrics.proxy_auth(AuthOutcome::no_credentials);
  metrics.proxy_auth(AuthOutcome::wrong_token);
  metrics.proxy_auth(AuthOutcome::wrong_token);
  const std::string text = metrics.serialize();

  struct Row {
    std::string series;
    double value;
  };
  const std::vector<Row> rows = {
      {R"(sandgate_connections_total{mode="connect",outcome="denied"})", 2},
      {R"(sandgate_connections_total{mode="connect",outcome="allowed"})", 0},
      {R"(sandgate_requests_total{mode="http",outcome="allowed"})", 1},
      {R"(sandgate_denials_total{reason="denied_by_rule"})", 2},
      {R"(sandgate_denials_total{reason="other"})", 1},
      {R"(sandgate_errors_total{code="UPSTREAM_DNS_FAILED",side="upstream"})", 1},
      {R"(sandgate_errors_total{code="UPSTREAM_TIMEOUT",side="upstream"})", 1},
      {R"(sandgate_errors_total{code="other",side="internal"})", 1},
      {R"(sandgate_bytes_total{direction="upstream"})", 1024},
      {R"(sandgate_bytes_total{direction="downstream"})", 0},
      {R"(sandgate_dns_lookups_total{result="cache_hit"})", 1},
      {R"(sandgate_proxy_auth_total{outcome="no_credentials"})", 1},
      {R"(sandgate_proxy_auth_total{outcome="wrong_token"})", 2},
      {R"(sandgate_proxy_auth_total{outcome="ok"})", 0},
  };
  for (const Row& row : rows) EXPECT_EQ(sample(text, row.series), row.value) << row.series;
}

TEST(Metrics, OutOfRangeIndexCountsAsOther) {
  Metrics metrics = make_metrics();
  metrics.denial(std::size_t{9999});
  metrics.error(std::size_t{9999}, Side::client);
  const std::string text = metrics.serialize();
  EXPECT_EQ(sample(text, R"(sandgate_denials_total{reason="other"})"), 1.0);
  EXPECT_EQ(sample(text, R"(sandgate_errors_total{code="other",side="client"})"), 1.0);
}

TEST(Metrics, ActiveGaugesFollowGuards) {
  Metrics metrics = make_metrics();
  {
    const Metrics::Active conn = metrics.active_connection();
    Metrics::Active tunnel = metrics.active_tunnel();
    const Metrics::Active moved = std::move(tunnel);
    metrics.connection_opened();
    const std::string text = metrics.serialize();
    EXPECT_EQ(sample(text, "sandgate_active_connections"), 2.0);
    EXPECT_EQ(sample(text, "sandgate_active_tunnels"), 1.0);
    metrics.connection_closed();
  }
  const std::string text = metrics.serialize();
  EXPECT_EQ(sample(text, "sandgate_active_connections"), 0.0);
  EXPECT_EQ(sample(text, "sandgate_active_tunnels"), 0.0);
}

TEST(Metrics, UpstreamPoolGaugeSumsWhatThePoolsReport) {
  Metrics metrics = make_metrics();
  EXPECT_EQ(sample(metrics.serialize(), "sandgate_upstream_pool_connections"), 0.0);
  metrics.upstream_pool_changed(3);   // one worker's pool
  metrics.upstream_pool_changed(2);   // another's
  metrics.upstream_pool_changed(-3);  // the first one emptied
  EXPECT_EQ(sample(metrics.serialize(), "sandgate_upstream_pool_connections"), 2.0);
}

TEST(Metrics, CredentialTokenCacheEntriesAreReadAtScrapeTime) {
  Metrics metrics = make_metrics();
  std::size_t entries = 2;
  metrics.set_credentials_source([&entries] {
    return std::vector<Metrics::CredentialCounts>{{"gh", "github_app", 1, 0, 60.0, entries}};
  });
  const std::string series = R"(sandgate_credential_token_cache_entries{credential="gh"})";
  EXPECT_EQ(sample(metrics.serialize(), series), 2.0);
  entries = 1;  // a scope dropped by a reload
  EXPECT_EQ(sample(metrics.serialize(), series), 1.0);
}

TEST(Metrics, HistogramsObserveSeconds) {
  Metrics metrics = make_metrics();
  metrics.dns_lookup_duration(3ms);
  metrics.upstream_connect_duration(2s);
  const std::string text = metrics.serialize();
  EXPECT_EQ(sample(text, R"(sandgate_dns_lookup_duration_seconds_bucket{le="0.0025"})"), 0.0);
  EXPECT_EQ(sample(text, R"(sandgate_dns_lookup_duration_seconds_bucket{le="0.005"})"), 1.0);
  EXPECT_EQ(sample(text, "sandgate_dns_lookup_duration_seconds_count"), 1.0);
  EXPECT_EQ(sample(text, R"(sandgate_upstream_connect_duration_seconds_bucket{le="1"})"), 0.0);
  EXPECT_EQ(sample(text, R"(sandgate_upstream_connect_duration_seconds_bucket{le="2.5"})"), 1.0);
  EXPECT_EQ(sample(text, "sandgate_upstream_connect_duration_seconds_sum"), 2.0);
}

TEST(Metrics, AuditFailuresAreReadAtScrapeTime) {
  Metrics metrics = make_metrics();
  std::uint64_t failures = 0;
  metrics.set_audit_failures_source([&failures] { return failures; });
  failures = 3;
  EXPECT_EQ(sample(metrics.serialize(), "sandgate_audit_log_write_failures_total"), 3.0);
  failures = 5;
  EXPECT_EQ(sample(metrics.serialize(), "sandgate_audit_log_write_failures_total"), 5.0);
}

TEST(Metrics, ConcurrentIncrementsAreNotLost) {
  Metrics metrics = make_metrics();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&metrics] {
      for (int i = 0; i < 10000; ++i) metrics.connection(Mode::tls, Outcome::allowed);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(
      sample(metrics.serialize(), R"(sandgate_connections_total{mode="tls",outcome="allowed"})"),
      40000.0);
}

std::optional<std::filesystem::path> find_promtool() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / "promtool";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

TEST(Metrics, PromtoolAcceptsTheExposition) {
  const auto promtool = find_promtool();
  if (!promtool) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  Metrics metrics = make_metrics();
  metrics.connection(Mode::http, Outcome::allowed);
  metrics.dns_lookup_duration(1ms);
  const std::string text = metrics.serialize();

  const std::string command = promtool->string() + " check metrics";
  FILE* pipe = ::popen(command.c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  EXPECT_EQ(std::fwrite(text.data(), 1, text.size(), pipe), text.size());
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
}

}  // namespace
}  // namespace sandgate::telemetry
