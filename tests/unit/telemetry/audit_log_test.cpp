#include "telemetry/audit_log.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace sandgate::telemetry {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

json::value parse_line(const std::string& line) {
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "exactly one newline, at the end";
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  EXPECT_FALSE(ec) << ec.message() << " in " << line;
  return v;
}

bool has(const json::value& v, std::string_view pointer) {
  boost::system::error_code ec;
  return v.find_pointer(pointer, ec) != nullptr;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line + '\n');
  return lines;
}

using sandgate::test::TempDir;

AuditRecord denied_record() {
  AuditRecord r;
  r.event = "SANDBOX_NETWORK_DENIED";
  r.outcome = "failure";
  r.sandbox_id = "agent-1";
  r.source_ip = "127.0.0.1";
  r.source_port = 5555;
  r.protocol = "http";
  r.host = "evil.example";
  r.port = 443;
  r.reason = "no_matching_rule";
  r.rule = "default-deny";
  r.method = "GET";
  r.url_path = "/upload";
  r.http_status = 403;
  r.time = std::chrono::sys_days{std::chrono::year{2026} / 11 / 29} + 10h + 123ms;
  return r;
}

TEST(FormatAuditLine, DeniedRecordHasEveryField) {
  const json::value v = parse_line(format_audit_line(denied_record()));
  struct Row {
    std::string_view pointer;
    json::value expected;
  };
  const std::vector<Row> rows = {
      {"/@timestamp", "2026-11-29T10:00:00.123Z"},
      {"/event/code", "SANDBOX_NETWORK_DENIED"},
      {"/event/kind", "event"},
      {"/event/category/0", "network"},
      {"/event/type/0", "denied"},
      {"/event/outcome", "failure"},
      {"/event/reason", "no_matching_rule"},
      {"/labels/sandbox_id", "agent-1"},
      {"/source/ip", "127.0.0.1"},
      {"/source/port", 5555},
      {"/source/bytes", 0},
      {"/destination/address", "evil.example"},
      {"/destination/domain", "evil.example"},
      {"/destination/port", 443},
      {"/destination/bytes", 0},
      {"/network/protocol", "http"},
      {"/rule/name", "default-deny"},
      {"/http/request/method", "GET"},
      {"/http/response/status_code", 403},
      {"/url/path", "/upload"},
  };
  for (const Row& row : rows) {
    boost::system::error_code ec;
    const json::value* got = v.find_pointer(row.pointer, ec);
    ASSERT_NE(got, nullptr) << row.pointer;
    // Integers may parse back as int64 or uint64; compare their serialised text.
    EXPECT_EQ(json::serialize(*got), json::serialize(row.expected)) << row.pointer;
  }
  EXPECT_FALSE(has(v, "/destination/ip"));
  EXPECT_FALSE(has(v, "/event/duration"));
}

TEST(FormatAuditLine, TimestampIsRightWithinASecondAndAcrossSeconds) {
  // The text up to the seconds is cached per second: lines of one second, of the next, and
  // of an earlier one (a record's own time need not be increasing) each get their own.
  const auto day = std::chrono::sys_days{std::chrono::year{2026} / 12 / 31};
  const std::pair<std::chrono::system_clock::time_point, std::string_view> rows[] = {
      {day + 23h + 59min + 59s + 7ms, "2026-12-31T23:59:59.007Z"},
      {day + 23h + 59min + 59s + 999ms, "2026-12-31T23:59:59.999Z"},
      {day + 24h + 40ms, "2027-01-01T00:00:00.040Z"},
      {day + 23h + 59min + 59s, "2026-12-31T23:59:59.000Z"},
  };
  for (const auto& [time, text] : rows) {
    AuditRecord r = denied_record();
    r.time = time;
    EXPECT_EQ(parse_line(format_audit_line(r)).at_pointer("/@timestamp").as_string(), text);
  }
}

TEST(FormatAuditLine, DenialCarriesItsSuggestion) {
  AuditRecord r = denied_record();
  r.suggestion = "[profiles.dev] allow = [\"evil.example:443\"]";
  const json::value v = parse_line(format_audit_line(r));
  EXPECT_EQ(v.at_pointer("/labels/suggestion"), "[profiles.dev] allow = [\"evil.example:443\"]");
  EXPECT_FALSE(has(parse_line(format_audit_line(denied_record())), "/labels/suggestion"));
}

TEST(FormatAuditLine, ClosedConnectionCarriesBytesDurationAndDialledAddress) {
  AuditRecord r;
  r.event = "connection_closed";
  r.outcome = "success";
  r.protocol = "connect";
  r.host = "api.example";
  r.port = 443;
  r.destination_ip = "203.0.113.7";
  r.bytes_up = 1234;
  r.bytes_down = 56789;
  r.duration = 1500ms;
  const json::value v = parse_line(format_audit_line(r));
  EXPECT_EQ(v.at_pointer("/event/type/0"), "allowed");
  EXPECT_EQ(v.at_pointer("/destination/ip"), "203.0.113.7");
  EXPECT_EQ(v.at_pointer("/source/bytes").to_number<std::uint64_t>(), 1234U);
  EXPECT_EQ(v.at_pointer("/destination/bytes").to_number<std::uint64_t>(), 56789U);
  EXPECT_EQ(v.at_pointer("/event/duration").to_number<std::int64_t>(), 1'500'000'000);
}

TEST(FormatAuditLine, OmitsEmptyOptionalFields) {
  AuditRecord r;
  r.event = "UPSTREAM_CONNECT_FAILED";
  r.outcome = "failure";
  const json::value v = parse_line(format_audit_line(r));
  for (const std::string_view pointer :
       {"/labels", "/source/ip", "/source/port", "/destination/address", "/destination/domain",
        "/destination/port", "/destination/ip", "/network", "/rule", "/http", "/url",
        "/event/reason", "/event/duration"}) {
    EXPECT_FALSE(has(v, pointer)) << pointer;
  }
  EXPECT_EQ(v.at_pointer("/event/type/0"), "error");
  EXPECT_TRUE(has(v, "/@timestamp"));
}

TEST(FormatAuditLine, DomainOnlyForNames) {
  struct Row {
    std::string_view host;
    bool is_name;
  };
  const std::vector<Row> rows = {
      {"example.com", true},       {"example.com.", true},
      {"1.2.3.example", true},     {"xn--bcher-kva.example", true},
      {"127.0.0.1", false},        {"127.1", false},
      {"2130706433", false},       {"0x7f.1", false},
      {"10.0.0.1.", false},        {"[::1]", false},
      {"::ffff:127.0.0.1", false},
  };
  for (const Row& row : rows) {
    AuditRecord r;
    r.host = row.host;
    const json::value v = parse_line(format_audit_line(r));
    EXPECT_EQ(v.at_pointer("/destination/address"), json::value(row.host)) << row.host;
    EXPECT_EQ(has(v, "/destination/domain"), row.is_name) << row.host;
  }
}

TEST(FormatAuditLine, EscapesHostileCharacters) {
  struct Row {
    std::string_view name;
    std::string host;
    std::string expected;  // after the round trip
  };
  const std::vector<Row> rows = {
      {"quote and backslash", R"(a"b\c)", R"(a"b\c)"},
      {"newline injection", "a\n{\"event\":\"forged\"}", "a\n{\"event\":\"forged\"}"},
      {"control characters", std::string("a\x01\x1f\tb\0c", 8), std::string("a\x01\x1f\tb\0c", 8)},
      {"invalid UTF-8", "a\xff\xc3(b", "a\xEF\xBF\xBD\xEF\xBF\xBD(b"},
      {"surrogate", "a\xed\xa0\x80", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"valid UTF-8 kept",
       "b\xC3\xBC"
       "cher",
       "b\xC3\xBC"
       "cher"},
  };
  for (const Row& row : rows) {
    AuditRecord r;
    r.host = row.host;
    r.sandbox_id = row.host;
    const json::value v = parse_line(format_audit_line(r));
    EXPECT_EQ(v.at_pointer("/destination/address").as_string(), row.expected) << row.name;
    EXPECT_EQ(v.at_pointer("/labels/sandbox_id").as_string(), row.expected) << row.name;
  }
}

// The exact text of two lines, as the line writer produced it before it wrote by hand
// (2026-12-03): an allowed request and a denial with every optional field, one value
// escaped by the serializer.
TEST(FormatAuditLine, ExactText) {
  AuditRecord r;
  r.event = "http_request";
  r.outcome = "success";
  r.sandbox_id = "bench";
  r.source_ip = "127.0.0.1";
  r.source_port = 36716;
  r.protocol = "http";
  r.host = "127.0.0.1";
  r.port = 18080;
  r.destination_ip = "127.0.0.1";
  r.rule = "sandboxes.bench.allow_cidrs:127.0.0.1/32";
  r.method = "GET";
  r.url_path = "/small?q=1";
  r.http_version = "1.1";
  r.http_status = 200;
  r.ended = Ended::completed;
  r.bytes_up = 46;
  r.bytes_down = 353;
  r.duration = std::chrono::nanoseconds(5678617);
  r.time = std::chrono::sys_days{std::chrono::year{2026} / 12 / 3} + 14h + 42min + 43s + 817ms;
  EXPECT_EQ(
      format_audit_line(r),
      R"({"@timestamp":"2026-12-03T14:42:43.817Z","ecs":{"version":"8.11.0"},"event":{"code":"http_request","kind":"event","category":["network"],"type":["allowed"],"outcome":"success","duration":5678617},"labels":{"sandbox_id":"bench","termination":"completed"},"source":{"ip":"127.0.0.1","port":36716,"bytes":46},"destination":{"address":"127.0.0.1","ip":"127.0.0.1","port":18080,"bytes":353},"network":{"protocol":"http"},"rule":{"name":"sandboxes.bench.allow_cidrs:127.0.0.1/32"},"http":{"version":"1.1","request":{"method":"GET"},"response":{"status_code":200}},"url":{"path":"/small"}})"
      "\n");
  AuditRecord d;
  d.event = "SANDBOX_NETWORK_DENIED";
  d.outcome = "failure";
  d.sandbox_id = "agent-1";
  d.source_ip = "::1";
  d.source_port = 5555;
  d.protocol = "connect";
  d.host = "api.example.com";
  d.port = 443;
  d.reason = "no_matching_rule";
  d.rule = "default-deny";
  d.suggestion = "allow = [\"api.example.com\"]";
  d.would_deny = "x";
  d.credential_name = "gh";
  d.credential_fingerprint = "0123456789ab";
  d.redactions = 2;
  d.tls_sni = "api.example.com";
  d.url_scheme = "https";
  d.original_destination = "10.0.0.1:443";
  d.suppressed_lines = 7;
  d.phase = Phase::headers;
  d.ended = Ended::timeout;
  d.http_status = 403;
  d.time = std::chrono::sys_days{std::chrono::year{2026} / 12 / 3} + 1h + 2min + 3s + 4ms;
  EXPECT_EQ(
      format_audit_line(d),
      R"({"@timestamp":"2026-12-03T01:02:03.004Z","ecs":{"version":"8.11.0"},"event":{"code":"SANDBOX_NETWORK_DENIED","kind":"event","category":["network"],"type":["denied"],"outcome":"failure","reason":"no_matching_rule"},"labels":{"sandbox_id":"agent-1","original_destination":"10.0.0.1:443","suppressed_lines":7,"termination":"timeout","termination_phase":"headers","would_deny":"x","suggestion":"allow = [\"api.example.com\"]","redactions":2},"source":{"ip":"::1","port":5555,"bytes":0},"destination":{"address":"api.example.com","domain":"api.example.com","port":443,"bytes":0},"network":{"protocol":"connect"},"rule":{"name":"default-deny"},"credential":{"name":"gh","fingerprint":"0123456789ab"},"http":{"response":{"status_code":403}},"url":{"scheme":"https"},"tls":{"client":{"server_name":"api.example.com"}}})"
      "\n");
}

// A failed mint's line: what the token endpoint answered, inside `credential`.
TEST(FormatAuditLine, CredentialEndpointStatusAndError) {
  AuditRecord r;
  r.event = "CREDENTIAL_UNAVAILABLE";
  r.outcome = "failure";
  r.credential_name = "gh";
  r.credential_endpoint_status = 401;
  r.credential_endpoint_error = "Bad credentials";
  r.http_status = 503;
  const std::string line = format_audit_line(r);
  EXPECT_NE(line.find(R"("credential":{"name":"gh","endpoint":{"status_code":401,)"
                      R"("error":"Bad credentials"}})"),
            std::string::npos)
      << line;
  r.credential_endpoint_status = 0;
  r.credential_endpoint_error = {};
  EXPECT_NE(format_audit_line(r).find(R"("credential":{"name":"gh"})"), std::string::npos);
}

// Every byte value at every position of values of 7 to 17 bytes (the plain-ASCII test reads
// eight bytes at a time, then the tail): the line parses, and the value comes back as it was
// (ASCII, escaped where JSON needs it) or with the byte replaced (not UTF-8 on its own).
TEST(FormatAuditLine, EveryByteAtEveryPosition) {
  for (std::size_t size = 7; size <= 17; ++size) {
    for (std::size_t at = 0; at < size; ++at) {
      for (unsigned b = 0; b < 256; ++b) {
        std::string value(size, 'a');
        value[at] = static_cast<char>(b);
        AuditRecord r;
        r.reason = value;
        const std::string line = format_audit_line(r);
        const json::value v = parse_line(line);
        std::string want = value;
        if (b >= 0x80) want.replace(at, 1, "\xEF\xBF\xBD");
        ASSERT_EQ(v.at_pointer("/event/reason").as_string(), want) << size << " " << at << " " << b;
        const bool raw = b >= 0x20 && b <= 0x7F && b != '"' && b != '\\';  // as JSON has it
        EXPECT_EQ(line.find("\"reason\":\"" + value + "\"") != std::string::npos, raw)
            << size << " " << at << " " << b;
      }
    }
  }
}

TEST(FormatAuditLine, TruncatesLongFields) {
  const std::string long_ascii(5000, 'a');
  std::string long_utf8;
  for (int i = 0; i < 600; ++i) long_utf8 += "\xC3\xA9";  // 1200 bytes of 'é'
  AuditRecord r;
  r.host = long_ascii;
  r.reason = long_utf8;
  r.url_path = long_ascii;
  const std::string line = format_audit_line(r);
  const json::value v = parse_line(line);
  // A host keeps its right end (see PaddedNameKeepsItsRegisteredDomain).
  EXPECT_EQ(v.at_pointer("/destination/address").as_string(),
            "\xE2\x80\xA6" + std::string(kMaxShownHostBytes - 3, 'a'));
  EXPECT_EQ(v.at_pointer("/url/path").as_string().size(), kMaxAuditFieldBytes);
  const json::string& reason = v.at_pointer("/event/reason").as_string();
  EXPECT_EQ(reason.size(), kMaxAuditFieldBytes);  // 512 whole characters
  EXPECT_EQ(reason.subview(0, 2), "\xC3\xA9");
  EXPECT_LT(line.size(), 5 * kMaxAuditFieldBytes);
}

// Issue 9 item 5: a name padded on the left past kMaxShownHostBytes is shown by its rightmost
// whole labels, marked "…" and labels.host_shortened, never by its padding.
TEST(ShownHost, KeepsTheRightmostWholeLabels) {
  const std::string ell = "\xE2\x80\xA6";
  struct Row {
    std::string_view name;
    std::string host;
    std::string expected;
    bool shortened;
  };
  std::string padded;
  for (int i = 0; i < 10; ++i) padded += std::string(60, 'a' + i) + ".";
  padded += "evil.example";  // 610 + 12 bytes
  // The last labels that fit in 297 bytes: 4 x 61 of padding + "evil.example" = 256 bytes.
  std::string kept;
  for (int i = 6; i < 10; ++i) kept += std::string(60, 'a' + i) + ".";
  kept += "evil.example";
  std::string one_label(400, 'x');
  std::string utf8;
  for (int i = 0; i < 200; ++i) utf8 += "\xC3\xA9";  // 400 bytes, no dot
  const std::vector<Row> rows = {
      {"short name as is", "api.example.com", "api.example.com", false},
      {"exactly the limit", std::string(kMaxShownHostBytes, 'a'),
       std::string(kMaxShownHostBytes, 'a'), false},
      {"padded name", padded, ell + kept, true},
      {"boundary on a dot", std::string(400, 'a') + "." + std::string(296, 'b'),
       ell + std::string(296, 'b'), true},
      {"one long label", one_label, ell + std::string(297, 'x'), true},
      {"no dot, UTF-8 boundary", utf8, ell + utf8.substr(utf8.size() - 296), true},
  };
  for (const Row& row : rows) {
    const ShownHost shown = shown_host(row.host);
    EXPECT_EQ(shown.text, row.expected) << row.name;
    EXPECT_EQ(shown.shortened, row.shortened) << row.name;
    EXPECT_EQ(shown.original_bytes, row.host.size()) << row.name;
    EXPECT_LE(shown.text.size(), kMaxShownHostBytes) << row.name;
  }
}

TEST(FormatAuditLine, PaddedNameKeepsItsRegisteredDomain) {
  const std::string host = std::string(500, 'a') + ".x.evil.example";
  AuditRecord r = denied_record();
  r.host = host;
  r.tls_sni = host;
  const json::value v = parse_line(format_audit_line(r));
  const std::string domain(v.at_pointer("/destination/domain").as_string());
  EXPECT_EQ(domain, "\xE2\x80\xA6x.evil.example");
  EXPECT_EQ(v.at_pointer("/destination/address").as_string(), domain);
  EXPECT_EQ(v.at_pointer("/tls/client/server_name").as_string(), domain);
  EXPECT_EQ(v.at_pointer("/labels/host_shortened"), true);
  EXPECT_EQ(v.at_pointer("/labels/host_bytes").to_number<std::size_t>(), host.size());
  // Not shortened: no marker.
  const json::value plain = parse_line(format_audit_line(denied_record()));
  EXPECT_FALSE(has(plain, "/labels/host_shortened"));
  EXPECT_FALSE(has(plain, "/labels/host_bytes"));
}

// event.outcome and event.type by kind of line: the 407 challenge is neither a success nor a
// failure (ECS "unknown", type "info").
TEST(FormatAuditLine, OutcomeAndTypeOfEachKindOfLine) {
  struct Row {
    std::string event, outcome, want_outcome, want_type;
  };
  const Row rows[] = {
      {"SANDBOX_NETWORK_DENIED", "failure", "failure", "denied"},
      {"connection_closed", "success", "success", "allowed"},
      {"UPSTREAM_TIMEOUT", "failure", "failure", "error"},
      {"PROXY_AUTH_REQUIRED", "failure", "failure", "error"},  // a wrong token
      {"PROXY_AUTH_REQUIRED", "unknown", "unknown", "info"},   // the challenge
  };
  for (const Row& row : rows) {
    AuditRecord r;
    r.event = row.event;
    r.outcome = row.outcome;
    const json::value v = parse_line(format_audit_line(r));
    EXPECT_EQ(v.at_pointer("/event/outcome").as_string(), row.want_outcome)
        << row.event << row.outcome;
    EXPECT_EQ(v.at_pointer("/event/type/0").as_string(), row.want_type) << row.event << row.outcome;
  }
}

TEST(FormatAuditLine, UrlPathDropsQueryAndFragment) {
  AuditRecord r;
  r.url_path = "/v1/items?access_token=s3cret#frag";
  const std::string line = format_audit_line(r);
  EXPECT_EQ(parse_line(line).at_pointer("/url/path"), "/v1/items");
  EXPECT_EQ(line.find("s3cret"), std::string::npos);
}

TEST(AuditLog, OffWritesNothing) {
  const bool existed = fs::exists("off");
  AuditLog log("off");
  log.write(denied_record());
  log.flush();
  EXPECT_EQ(log.write_failures(), 0U);
  if (!existed) {
    EXPECT_FALSE(fs::exists("off"));
  }
}

TEST(AuditLog, UnopenablePathThrows) {
  EXPECT_THROW(AuditLog("/nonexistent-sandgate-dir/audit.log"), std::runtime_error);
}

TEST(AuditLog, FileTargetAppendsLines) {
  const TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  { std::ofstream(path) << "existing\n"; }
  {
    AuditLog log(path.string());
    log.write(denied_record());
    log.write(denied_record());
    log.flush();
    EXPECT_EQ(log.write_failures(), 0U);
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[0], "existing\n");
  EXPECT_EQ(parse_line(lines[2]).at_pointer("/event/code"), "SANDBOX_NETWORK_DENIED");
}

TEST(AuditLog, NewFileIsCreatedWith0640) {
  const TempDir dir;
  const fs::path path = dir.path() / "new.log";
  const mode_t old_mask = ::umask(0);
  { AuditLog log(path.string()); }
  ::umask(old_mask);
  EXPECT_EQ(fs::status(path).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(AuditLog, ReopenAfterRenameWritesToNewFile) {
  const TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  const fs::path rotated = dir.path() / "audit.log.1";
  AuditLog log(path.string());
  log.write(denied_record());
  log.flush();
  fs::rename(path, rotated);
  log.write(denied_record());  // queued before reopen(): the old file
  log.reopen();
  AuditRecord second = denied_record();
  second.sandbox_id = "after-rotation";
  log.write(second);
  log.flush();
  EXPECT_EQ(read_lines(rotated).size(), 2U);
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(parse_line(lines[0]).at_pointer("/labels/sandbox_id"), "after-rotation");
  EXPECT_EQ(log.write_failures(), 0U);
}

TEST(AuditLog, FailedReopenKeepsTheOldFile) {
  const TempDir dir;
  fs::create_directory(dir.path() / "logs");
  AuditLog log((dir.path() / "logs" / "audit.log").string());
  fs::rename(dir.path() / "logs", dir.path() / "moved");  // the path can no longer be created
  log.reopen();
  log.write(denied_record());
  log.flush();
  EXPECT_EQ(log.write_failures(), 1U);
  EXPECT_EQ(read_lines(dir.path() / "moved" / "audit.log").size(), 1U);
}

TEST(AuditLog, WriteFailureIsCounted) {
  AuditLog log("/dev/full");
  log.write(denied_record());
  log.write(denied_record());
  log.flush();
  EXPECT_EQ(log.write_failures(), 2U);
}

TEST(AuditLog, ClosedPipeIsAFailureNotASignal) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  AuditLog log("/proc/self/fd/" + std::to_string(fds[1]));
  ::close(fds[0]);  // no reader: write(2) raises SIGPIPE, which must not kill the test
  log.write(denied_record());
  log.flush();
  EXPECT_EQ(log.write_failures(), 1U);
  ::close(fds[1]);
}

TEST(AuditLog, StalledSinkDropsLinesInsteadOfBlocking) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // Fill the pipe so the writer thread blocks on its first line.
  ASSERT_EQ(::fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
  const std::string chunk(4096, 'x');
  while (::write(fds[1], chunk.data(), chunk.size()) > 0) {
  }
  const std::string sink = "/proc/self/fd/" + std::to_string(fds[1]);  // a blocking description
  std::thread reader;
  {
    AuditLog log(sink, /*max_queued_lines=*/2);
    for (int i = 0; i < 50; ++i) log.write(denied_record());  // returns although nothing drains
    EXPECT_GE(log.write_failures(), 46U);
    reader = std::thread([fd = fds[0]] {
      char buf[4096];
      while (::read(fd, buf, sizeof buf) > 0) {
      }
    });
  }  // the destructor writes what was queued, now that the reader drains the pipe
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
}

TEST(AuditLog, FlushUntilGivesUpOnAStalledReaderAndCountsEveryLineItDropped) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
  const std::string chunk(4096, 'x');
  while (::write(fds[1], chunk.data(), chunk.size()) > 0) {
  }
  // A blocking description, as stdout usually is: the writer must not block in write(2).
  const int blocking = ::open(("/proc/self/fd/" + std::to_string(fds[1])).c_str(), O_WRONLY);
  ASSERT_GE(blocking, 0);
  {
    AuditLog log("/proc/self/fd/" + std::to_string(blocking));
    for (int i = 0; i < 5; ++i) log.write(denied_record());
    log.flush_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    EXPECT_EQ(log.write_failures(), 5U);  // none reached the pipe, each one counted
    log.write(denied_record());           // after the deadline: dropped at once, not waited for
    log.flush();
    EXPECT_EQ(log.write_failures(), 6U);
  }  // and the destructor does not wait either
  std::string rest(4096, '\0');
  std::size_t drained = 0;
  ASSERT_EQ(::fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  for (ssize_t n; (n = ::read(fds[0], rest.data(), rest.size())) > 0;) {
    EXPECT_EQ(rest.substr(0, static_cast<std::size_t>(n)).find_first_not_of('x'),
              std::string::npos);
    drained += static_cast<std::size_t>(n);
  }
  EXPECT_GT(drained, 0U);  // only the filler: no fragment of a line
  ::close(blocking);
  ::close(fds[1]);
  ::close(fds[0]);
}

// Every string field full of control characters, each escaped to six bytes: a line longer
// than one write(2) of gathered lines (kMaxWriteBytes) may take.
AuditRecord huge_record(const std::string& filler) {
  AuditRecord r = denied_record();
  for (std::string_view* field :
       {&r.reason, &r.sandbox_id, &r.rule, &r.method, &r.url_path, &r.would_deny, &r.suggestion,
        &r.original_destination, &r.credential_name, &r.credential_fingerprint, &r.tls_sni,
        &r.source_ip, &r.protocol, &r.destination_ip, &r.http_version, &r.url_scheme}) {
    *field = filler;
  }
  return r;
}

TEST(AuditLog, LineLongerThanOneWriteGoesWholeBetweenItsNeighbours) {
  AuditRecord first = denied_record();
  first.sandbox_id = "before";
  AuditRecord last = denied_record();
  last.sandbox_id = "after";
  const std::string last_text = format_audit_line(last);  // before any long line
  const std::string filler(kMaxAuditFieldBytes, '\x01');
  const AuditRecord huge = huge_record(filler);
  ASSERT_GT(format_audit_line(huge).size(), AuditLog::kMaxWriteBytes);
  const TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  {
    AuditLog log(path.string());
    log.write(first);
    log.write(huge);
    log.write(last);
    log.flush();
    EXPECT_EQ(log.write_failures(), 0U);
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(parse_line(lines[0]).at_pointer("/labels/sandbox_id"), "before");
  EXPECT_EQ(parse_line(lines[1]).at_pointer("/url/path").as_string(), filler);
  // Lines are formatted in one buffer per thread: a short line after a long one is itself.
  EXPECT_EQ(lines[2], last_text);
}

TEST(AuditLog, ConcurrentWritesGiveWholeLines) {
  const TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  const std::vector<std::string> ids = {"sandbox-a", "sandbox-b", "sandbox-c", "sandbox-d"};
  {
    AuditLog log(path.string());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        AuditRecord r = denied_record();
        r.sandbox_id = ids[static_cast<std::size_t>(t)];
        const std::string long_path(900, static_cast<char>('a' + t));
        r.url_path = long_path;  // lines of ~1.5 KiB make torn writes visible
        for (int i = 0; i < kPerThread; ++i) log.write(r);
      });
    }
    for (auto& th : threads) th.join();
    log.flush();
    EXPECT_EQ(log.write_failures(), 0U);
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kPerThread));
  std::map<std::string, int> per_sandbox;
  for (const std::string& line : lines) {
    const json::value v = parse_line(line);
    const std::string id(v.at_pointer("/labels/sandbox_id").as_string());
    EXPECT_EQ(v.at_pointer("/url/path").as_string(), std::string(900, id.back()));
    ++per_sandbox[id];
  }
  for (const std::string& id : ids) EXPECT_EQ(per_sandbox[id], kPerThread) << id;
}

}  // namespace
}  // namespace sandgate::telemetry
