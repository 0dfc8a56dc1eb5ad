// LineParser over lines written by the daemon's own formatter (telemetry::format_audit_line),
// so the reader follows the writer; and over broken lines, each of which must fail cleanly
// and leave the parser ready for the next.
#include "audit/event.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "audit/time.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::audit {
namespace {

std::string without_newline(std::string line) {
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

std::chrono::system_clock::time_point at_ms(std::int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

TEST(AuditLineParser, ReadsEveryFieldOfADenialLine) {
  telemetry::AuditRecord r;
  r.event = "SANDBOX_NETWORK_DENIED";
  r.outcome = "failure";
  r.sandbox_id = "agent-1";
  r.source_ip = "127.0.0.1";
  r.source_port = 40000;
  r.protocol = "connect";
  r.host = "evil.example";
  r.port = 8443;
  r.reason = "no_matching_rule";
  r.rule = "profiles.default.deny:*.example";
  r.suggestion = "[profiles.default] allow = [\"evil.example:8443\"]";
  r.http_status = 403;
  r.time = at_ms(1'796'169'600'123);
  const std::string line = without_newline(telemetry::format_audit_line(r));

  LineParser parser;
  LineError error{};
  const auto e = parser.parse(line, error);
  ASSERT_TRUE(e) << line;
  EXPECT_EQ(e->time_ms, 1'796'169'600'123);
  EXPECT_EQ(e->code, "SANDBOX_NETWORK_DENIED");
  EXPECT_EQ(e->outcome, "failure");
  EXPECT_EQ(e->sandbox, "agent-1");
  EXPECT_EQ(e->host, "evil.example");
  EXPECT_EQ(e->port, 8443);
  EXPECT_EQ(e->reason, "no_matching_rule");
  EXPECT_EQ(e->rule, "profiles.default.deny:*.example");
  EXPECT_EQ(e->protocol, "connect");
  EXPECT_EQ(e->suggestion, "[profiles.default] allow = [\"evil.example:8443\"]");
}

TEST(AuditLineParser, ReadsBytesOfATunnelAndADnsSummary) {
  telemetry::AuditRecord r;
  r.event = "connection_closed";
  r.outcome = "success";
  r.sandbox_id = "ci";
  r.host = "github.com";
  r.port = 443;
  r.destination_ip = "140.82.112.3";
  r.bytes_up = 1234;
  r.bytes_down = 5'000'000'000;
  r.ended = telemetry::Ended::completed;
  r.time = at_ms(1000);
  LineParser parser;
  LineError error{};
  // The event's strings are views into the line: it must outlive them.
  const std::string line = without_newline(telemetry::format_audit_line(r));
  auto e = parser.parse(line, error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->bytes_up, 1234u);
  EXPECT_EQ(e->bytes_down, 5'000'000'000u);
  EXPECT_EQ(e->destination_ip, "140.82.112.3");

  telemetry::AuditRecord dns;
  dns.event = "SANDBOX_NETWORK_DENIED";
  dns.sandbox_id = "ci";
  dns.protocol = "dns";
  dns.reason = "burst_summary";
  dns.suppressed_lines = 77;
  dns.time = at_ms(2000);
  const std::string dns_line = without_newline(telemetry::format_audit_line(dns));
  e = parser.parse(dns_line, error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->suppressed, 77u);
  EXPECT_EQ(e->time_ms, 2000);
}

TEST(AuditLineParser, ReadsTheCredentialFields) {
  LineParser parser;
  LineError error{};
  const auto e =
      parser.parse(R"({"@timestamp":"1970-01-01T00:00:01Z","event":{"code":"http_request"},)"
                   R"("destination":{"address":"api.github.com","port":443},)"
                   R"("credential":{"name":"github-app","fingerprint":"sha256:0f1e2d3c"}})",
                   error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->credential_name, "github-app");
  EXPECT_EQ(e->credential_fingerprint, "sha256:0f1e2d3c");
}

struct BadRow {
  const char* name;
  std::string line;
  LineError error;
};

TEST(AuditLineParser, CountsBrokenLinesAndRecovers) {
  const std::string good = R"({"@timestamp":"2026-12-02T00:00:00Z","event":{"code":"x"}})";
  const std::vector<BadRow> rows = {
      {"empty", "", LineError::not_json},
      {"text", "not json", LineError::not_json},
      {"torn line", good.substr(0, good.size() / 2), LineError::not_json},
      {"two values", good + good, LineError::not_json},
      {"trailing comma", R"({"a":1,})", LineError::not_json},
      {"too deep", std::string(100, '[') + std::string(100, ']'), LineError::not_json},
      {"invalid UTF-8 in a field read",
       R"({"@timestamp":"2026-12-02T00:00:00Z","event":{"code":"x\xC3("}})", LineError::not_json},
      {"a surrogate in a field read",
       R"({"@timestamp":"2026-12-02T00:00:00Z","event":{"code":"\xED\xA0\x80"}})",
       LineError::not_json},
      {"array", "[1,2]", LineError::not_an_object},
      {"string", R"("x")", LineError::not_an_object},
      {"no timestamp", R"({"event":{"code":"x"}})", LineError::missing_fields},
      {"bad timestamp", R"({"@timestamp":"yesterday","event":{"code":"x"}})",
       LineError::missing_fields},
      {"timestamp a number", R"({"@timestamp":5,"event":{"code":"x"}})", LineError::missing_fields},
      {"no code", R"({"@timestamp":"2026-12-02T00:00:00Z","event":{}})", LineError::missing_fields},
      {"event not an object", R"({"@timestamp":"2026-12-02T00:00:00Z","event":"x"})",
       LineError::missing_fields},
  };
  LineParser parser;
  for (const BadRow& row : rows) {
    LineError error{};
    EXPECT_FALSE(parser.parse(row.line, error)) << row.name;
    EXPECT_EQ(error, row.error) << row.name;
    // The parser is whole again for the next line.
    const auto e = parser.parse(good, error);
    ASSERT_TRUE(e) << "after " << row.name;
    EXPECT_EQ(e->code, "x");
  }
}

TEST(AuditLineParser, ChecksUtf8OnlyInTheFieldsItReads) {
  // Bytes no daemon writes, in a field the report does not read: the line still counts.
  LineParser parser;
  LineError error{};
  const auto e = parser.parse(
      "{\"@timestamp\":\"2026-12-02T00:00:00Z\",\"event\":{\"code\":\"x\"},"
      "\"url\":{\"path\":\"/\xFF\"}}",
      error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "x");
}

TEST(AuditLineParser, IgnoresFieldsOfTheWrongType) {
  LineParser parser;
  LineError error{};
  const auto e = parser.parse(
      R"({"@timestamp":"2026-12-02T00:00:00Z","event":{"code":"x","reason":7},)"
      R"("labels":{"sandbox_id":["a"]},"destination":{"address":1,"port":70000,"bytes":-5}})",
      error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->reason, "");
  EXPECT_EQ(e->sandbox, "");
  EXPECT_EQ(e->host, "");
  EXPECT_EQ(e->port, 0);
  EXPECT_EQ(e->bytes_down, 0u);
}

TEST(AuditLineParser, ReusesItsStorageForManyLines) {
  // Many lines through one parser, larger than its first buffer too: every one parses.
  LineParser parser;
  LineError error{};
  const std::string big_host(4000, 'a');
  for (int i = 0; i < 2000; ++i) {
    const std::string host = i % 2 == 0 ? "h" + std::to_string(i) : big_host;
    std::string line = R"({"@timestamp":"2026-12-02T00:00:00Z","event":{"code":"c"},)"
                       R"("destination":{"address":")" +
                       host + R"(","port":443}})";
    const auto e = parser.parse(line, error);
    ASSERT_TRUE(e) << i;
    ASSERT_EQ(e->host, host);
  }
}

}  // namespace
}  // namespace sandgate::audit
