// The sandbox DNS listener through the real daemon: allowed names answered from upstream with
// their TTLs, everything else REFUSED with an Extended DNS Error and an audit line and never
// sent upstream, malformed input answered FORMERR or dropped, and the daemon still answering.
// Driven by dig (UDP and TCP) and by raw sockets for what dig will not send.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_dns_server.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

// What dig printed, picked apart.
struct DigResult {
  std::string status;                  // "NOERROR", "REFUSED", ...
  std::string flags;                   // "qr rd ra"
  std::string ede;                     // the EDE line's text, "" when none
  std::vector<std::string> answers;    // "allowed.test. 120 IN A 192.0.2.10", whitespace squeezed
  std::vector<std::string> authority;  // the AUTHORITY SECTION's records, the same way
  std::string raw;
};

std::string squeeze(const std::string& line) {
  return std::regex_replace(line, std::regex("[ \t]+"), " ");
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void set_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(t.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Sends one datagram and waits for one reply (nullopt on timeout).
std::optional<Bytes> udp_exchange(std::uint16_t port, const Bytes& query,
                                  std::chrono::milliseconds timeout = 1000ms) {
  Fd s(::socket(AF_INET, SOCK_DGRAM, 0));
  const sockaddr_in to = loopback(port);
  set_timeout(s.fd, timeout);
  ::sendto(s.fd, query.data(), query.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
  Bytes reply(65536);
  const ssize_t n = ::recv(s.fd, reply.data(), reply.size(), 0);
  if (n < 0) return std::nullopt;
  reply.resize(static_cast<std::size_t>(n));
  return reply;
}

// A TCP connection to the DNS listener, for raw framing.
struct TcpConn {
  Fd s{::socket(AF_INET, SOCK_STREAM, 0)};
  explicit TcpConn(std::uint16_t port) {
    const sockaddr_in to = loopback(port);
    EXPECT_EQ(::connect(s.fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
    set_timeout(s.fd, 2000ms);
  }
  void send(const Bytes& b) {
    EXPECT_EQ(::send(s.fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  // Reads exactly n bytes; fewer when the peer closes or times out.
  Bytes read(std::size_t n) {
    Bytes out(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(s.fd, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // One length-prefixed message; empty when the connection closed.
  Bytes read_message() {
    const Bytes prefix = read(2);
    if (prefix.size() < 2) return {};
    return read(static_cast<std::size_t>(prefix[0] << 8 | prefix[1]));
  }
  // True when the peer closed (EOF, or a reset when it left our bytes unread) within the
  // timeout.
  bool closed() {
    std::uint8_t b = 0;
    const ssize_t r = ::recv(s.fd, &b, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }
};

// A query with the given id, counts and raw question bytes (type A, class IN appended).
Bytes raw_query(std::uint16_t id, std::uint16_t qdcount, const Bytes& name) {
  Bytes b = {static_cast<std::uint8_t>(id >> 8),
             static_cast<std::uint8_t>(id & 0xFF),
             0x01,
             0x00,
             static_cast<std::uint8_t>(qdcount >> 8),
             static_cast<std::uint8_t>(qdcount & 0xFF),
             0,
             0,
             0,
             0,
             0,
             0};
  b.insert(b.end(), name.begin(), name.end());
  b.insert(b.end(), {0, 1, 0, 1});
  return b;
}

const Bytes kAllowedName = {7, 'a', 'l', 'l', 'o', 'w', 'e', 'd', 4, 't', 'e', 's', 't', 0};

unsigned rcode_of(const Bytes& r) {
  return r.size() >= 4 ? r[3] & 0x0Fu : 99u;
}
unsigned id_of(const Bytes& r) {
  return r.size() >= 2 ? static_cast<unsigned>(r[0] << 8 | r[1]) : 0u;
}
unsigned ancount_of(const Bytes& r) {
  return r.size() >= 8 ? static_cast<unsigned>(r[6] << 8 | r[7]) : 0u;
}

// A name in wire form (uncompressed labels, then the root).
Bytes name_bytes(const std::string& name) {
  Bytes out;
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t dot = std::min(name.find('.', at), name.size());
    out.push_back(static_cast<std::uint8_t>(dot - at));
    out.insert(out.end(), name.begin() + static_cast<std::ptrdiff_t>(at),
               name.begin() + static_cast<std::ptrdiff_t>(dot));
    at = dot + 1;
  }
  out.push_back(0);
  return out;
}

class ProxyDns : public ::testing::Test {
 protected:
  void SetUp() override {
    upstream_.add_record("allowed.test", "192.0.2.10", 120);
    upstream_.add_record("allowed.test", "2001:db8::10", 120);
    upstream_.add_record("v4only.test", "192.0.2.11", 60);
    upstream_.set_reply("servfail.test", FakeDnsServer::Reply::servfail);
    // Negative answers with the zone's SOA: gone.allowed.test does not exist,
    // empty.allowed.test has no address records, v4only.test none of type AAAA.
    upstream_.set_soa("allowed.test", 300, 3);
    upstream_.set_soa("v4only.test", 60, 30);
    upstream_.set_reply("empty.allowed.test", FakeDnsServer::Reply::answer);
    SandgateOptions options;
    options.workers = 2;
    options.listeners = "dns = [\"127.0.0.1:0\"]\n";
    tables_ = R"(
[limits]
header_timeout_ms = 1000

[dns]
servers = [")" +
              upstream_.address() +
              R"("]
timeout_ms = 500

[dns.hosts]
"many.allowed.test" = [)" +
              many_addresses() +
              R"(]

[sandboxes.sb1]
sources = ["127.0.0.1"]
allow = ["allowed.test", "*.allowed.test", "v4only.test", "servfail.test"]
deny = ["blocked.allowed.test"]
)";
    options.tables = tables_;
    daemon_ = std::make_unique<SandgateProcess>(options);
    port_ = dns_port();
    ASSERT_NE(port_, 0) << daemon_->stderr_text();
  }

  // 40 static addresses: an answer too big for 512 bytes (the fake upstream speaks UDP only,
  // so it cannot serve one itself).
  static std::string many_addresses() {
    std::string out;
    for (int i = 1; i <= 40; ++i) {
      out += (i > 1 ? ", \"" : "\"") + std::string("198.51.100.") + std::to_string(i) + "\"";
    }
    return out;
  }

  // The DNS port from the ready line ("dns":["127.0.0.1:PORT"]).
  std::uint16_t dns_port() const {
    std::smatch m;
    const std::string text = daemon_->stderr_text();
    if (!std::regex_search(text, m, std::regex(R"re("dns":\["127\.0\.0\.1:(\d+)")re"))) return 0;
    return static_cast<std::uint16_t>(std::stoi(m[1]));
  }

  DigResult dig(const std::string& name, const std::string& type,
                std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {"dig", "@127.0.0.1", "-p",       std::to_string(port_),
                                     name,  type,         "+tries=1", "+time=2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const CommandResult r = run_command(argv, 10s);
    DigResult out;
    out.raw = r.out;
    std::smatch m;
    if (std::regex_search(r.out, m, std::regex(R"(status: ([A-Z]+))"))) out.status = m[1];
    if (std::regex_search(r.out, m, std::regex(R"(;; flags: ([a-z ]*);)"))) out.flags = m[1];
    if (std::regex_search(r.out, m, std::regex(R"(; EDE: 15 \(Blocked\): \((.*)\)\n)"))) {
      out.ede = m[1];
    }
    const auto read_section = [&r](const std::string& title, std::vector<std::string>& into) {
      const auto section = r.out.find(title);
      if (section == std::string::npos) return;
      std::size_t at = section + title.size();
      while (at < r.out.size() && r.out[at] != '\n') {
        const std::size_t end = r.out.find('\n', at);
        into.push_back(squeeze(r.out.substr(at, end - at)));
        at = end + 1;
      }
    };
    read_section(";; ANSWER SECTION:\n", out.answers);
    read_section(";; AUTHORITY SECTION:\n", out.authority);
    return out;
  }

  // The last audit line for `name` (destination.address), waiting a little for it.
  std::optional<boost::json::object> audit_for(const std::string& name,
                                               const std::string& code) const {
    return daemon_->wait_audit([&](const boost::json::object& o) {
      return json_string(o, "destination.address") == name && json_string(o, "event.code") == code;
    });
  }

  void expect_denial_line(const std::string& name, const std::string& reason,
                          const std::string& sandbox = "sb1") const {
    const auto line = audit_for(name, "SANDBOX_NETWORK_DENIED");
    ASSERT_TRUE(line) << daemon_->audit_text();
    EXPECT_EQ(json_string(*line, "event.outcome"), "failure");
    EXPECT_EQ(json_string(*line, "event.reason"), reason);
    EXPECT_EQ(json_string(*line, "network.protocol"), "dns");
    EXPECT_EQ(json_string(*line, "destination.domain"), name);
    if (sandbox.empty()) {
      EXPECT_FALSE(json_string(*line, "labels.sandbox_id"));
    } else {
      EXPECT_EQ(json_string(*line, "labels.sandbox_id"), sandbox);
    }
    EXPECT_TRUE(json_int(*line, "source.port").value_or(0) > 0);
  }

  // The daemon still answers an allowed name over UDP.
  void expect_still_answering() const {
    const DigResult r = dig("allowed.test", "A");
    EXPECT_EQ(r.status, "NOERROR") << r.raw;
    EXPECT_TRUE(daemon_->alive());
  }

  FakeDnsServer upstream_;
  std::string tables_;
  std::unique_ptr<SandgateProcess> daemon_;
  std::uint16_t port_ = 0;
};

TEST_F(ProxyDns, AllowedNameAnsweredFromUpstreamWithItsTtl) {
  const DigResult a = dig("allowed.test", "A");
  EXPECT_EQ(a.status, "NOERROR") << a.raw;
  EXPECT_EQ(a.flags, "qr rd ra");
  EXPECT_EQ(a.answers, std::vector<std::string>{"allowed.test. 120 IN A 192.0.2.10"});
  EXPECT_EQ(upstream_.queries("allowed.test", FakeDnsServer::kTypeA), 1u);

  const DigResult aaaa = dig("Allowed.Test.", "AAAA", {"+tcp"});
  EXPECT_EQ(aaaa.status, "NOERROR") << aaaa.raw;
  ASSERT_EQ(aaaa.answers.size(), 1u) << aaaa.raw;
  EXPECT_NE(aaaa.answers[0].find("IN AAAA 2001:db8::10"), std::string::npos) << aaaa.answers[0];
}

TEST_F(ProxyDns, MissingFamilyIsNoData) {
  const DigResult r = dig("v4only.test", "AAAA");
  EXPECT_EQ(r.status, "NOERROR") << r.raw;
  EXPECT_TRUE(r.answers.empty()) << r.raw;
  // With the SOA of the AAAA reply, its TTL bounded by sandgate's negative TTL (5 s).
  EXPECT_EQ(r.authority,
            std::vector<std::string>{"v4only.test. 5 IN SOA ns1.v4only.test. "
                                     "hostmaster.v4only.test. 2026120101 7200 3600 1209600 30"})
      << r.raw;
}

// Issue 9 item 7: upstream's NXDOMAIN and NODATA reach the sandbox as such (not SERVFAIL, which
// tools retry), with the zone's SOA so that the client can cache them (RFC 2308): TTL
// min(SOA TTL, MINIMUM, 5 s). Answers, not failures: no audit line, no error counted.
TEST_F(ProxyDns, UpstreamNxdomainAndNodataPassThroughWithTheirSoa) {
  const std::string soa =
      "allowed.test. 3 IN SOA ns1.allowed.test. hostmaster.allowed.test. "
      "2026120101 7200 3600 1209600 3";
  for (const auto& transport : {"+notcp", "+tcp"}) {
    SCOPED_TRACE(transport);
    const DigResult gone = dig("gone.allowed.test", "A", {transport});
    EXPECT_EQ(gone.status, "NXDOMAIN") << gone.raw;
    EXPECT_TRUE(gone.answers.empty()) << gone.raw;
    ASSERT_EQ(gone.authority.size(), 1u) << gone.raw;
    // A second ask may come from the worker's negative cache: its TTL has counted down.
    EXPECT_EQ(gone.authority[0].substr(0, 14), "allowed.test. ") << gone.raw;
    EXPECT_NE(gone.authority[0].find(" IN SOA ns1.allowed.test. hostmaster.allowed.test. "),
              std::string::npos)
        << gone.raw;

    const DigResult empty = dig("empty.allowed.test", "AAAA", {transport});
    EXPECT_EQ(empty.status, "NOERROR") << empty.raw;
    EXPECT_TRUE(empty.answers.empty()) << empty.raw;
    EXPECT_EQ(empty.authority.size(), 1u) << empty.raw;
  }
  const DigResult fresh = dig("gone2.allowed.test", "AAAA");
  EXPECT_EQ(fresh.status, "NXDOMAIN") << fresh.raw;
  EXPECT_EQ(fresh.authority, std::vector<std::string>{soa}) << fresh.raw;
  const std::string metrics = daemon_->metrics_text();
  EXPECT_EQ(metrics.find("sandgate_errors_total{code=\"UPSTREAM_DNS_FAILED\"} 1"),
            std::string::npos)
      << metrics;
  expect_still_answering();
  for (const auto& line : daemon_->audit_lines()) {
    EXPECT_NE(json_string(line, "event.code"), "UPSTREAM_DNS_FAILED")
        << boost::json::serialize(line);
  }
}

// Issue 9 item 7: a sandbox asking for thousands of denied names writes a bounded number of
// audit lines: the first 50 per 5-second window, then one summary with how many were left out
// (also counted in sandgate_audit_lines_suppressed_total). Every query is still refused with
// its EDE and counted in sandgate_denials_total.
TEST_F(ProxyDns, DenialsOfManyNamesAreAuditedAtABoundedRate) {
  constexpr int kQueries = 300;
  const auto started = std::chrono::steady_clock::now();
  int sunk = 0;
  for (int i = 0; i < kQueries; ++i) {
    const auto reply =
        udp_exchange(port_, raw_query(static_cast<std::uint16_t>(i), 1,
                                      name_bytes("n" + std::to_string(i) + ".evil.test")));
    // NOERROR with one answer: the sink's address.
    if (reply && reply->size() >= 8 && ((*reply)[3] & 0x0F) == 0 && (*reply)[7] == 1) ++sunk;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(sunk, kQueries);
  // The flood spans this many 5-second windows at most (one, unless the machine is slow).
  const auto windows = static_cast<std::size_t>(took / 5s) + 1;

  const auto summary = daemon_->wait_audit(
      [](const boost::json::object& o) {
        return json_string(o, "event.code") == "SANDBOX_NETWORK_DENIED" &&
               json_string(o, "event.reason") == "burst_summary";
      },
      10s);
  ASSERT_TRUE(summary) << daemon_->audit_text().substr(0, 2000);
  EXPECT_EQ(json_string(*summary, "labels.sandbox_id"), "sb1");
  EXPECT_EQ(json_string(*summary, "network.protocol"), "dns");
  std::size_t written = 0;
  std::int64_t left_out = 0;
  for (const auto& line : daemon_->audit_lines()) {
    if (json_string(line, "event.code") != "SANDBOX_NETWORK_DENIED") continue;
    if (json_string(line, "event.reason") == "burst_summary") {
      left_out += json_int(line, "labels.suppressed_lines").value_or(0);
    } else {
      EXPECT_EQ(json_string(line, "event.reason"), "no_matching_rule");
      ++written;
    }
  }
  EXPECT_GE(written, 50u);
  EXPECT_LE(written, 50u * windows);
  EXPECT_EQ(written + static_cast<std::size_t>(left_out), static_cast<std::size_t>(kQueries));
  const std::string metrics = daemon_->metrics_text();
  EXPECT_EQ(metric_value(metrics, "sandgate_audit_lines_suppressed_total"),
            static_cast<double>(left_out));
  EXPECT_NE(metrics.find("sandgate_denials_total{reason=\"no_matching_rule\"} " +
                         std::to_string(kQueries)),
            std::string::npos);
  EXPECT_EQ(upstream_.total_queries(), 0u);
}

// A refused name resolves to the sink (A only; AAAA has none), so that the tool's connection
// comes to the transparent listener and is refused there in its own protocol; the EDE still
// says why, and nothing is asked upstream. Other types are REFUSED. With
// `denied_names = "refused"` (a reload applies it) every refused name is REFUSED, as before.
TEST_F(ProxyDns, DeniedNameResolvesToTheSinkWithExtendedErrorAndNeverSentUpstream) {
  for (const auto& transport : {"+notcp", "+tcp"}) {
    SCOPED_TRACE(transport);
    const DigResult r = dig("evil.test", "A", {transport});
    EXPECT_EQ(r.status, "NOERROR") << r.raw;
    EXPECT_EQ(r.answers, std::vector<std::string>{"evil.test. 5 IN A 192.0.2.254"}) << r.raw;
    EXPECT_EQ(r.ede, "SANDBOX_NETWORK_DENIED: no_matching_rule (evil.test)") << r.raw;
    const DigResult aaaa = dig("evil.test", "AAAA", {transport});
    EXPECT_EQ(aaaa.status, "NOERROR") << aaaa.raw;
    EXPECT_TRUE(aaaa.answers.empty()) << aaaa.raw;
    EXPECT_EQ(aaaa.ede, "SANDBOX_NETWORK_DENIED: no_matching_rule (evil.test)") << aaaa.raw;
  }
  expect_denial_line("evil.test", "no_matching_rule");
  const DigResult txt = dig("evil.test", "TXT");
  EXPECT_EQ(txt.status, "REFUSED") << txt.raw;

  std::string error;
  std::string refused_tables = tables_;
  refused_tables.replace(refused_tables.find("timeout_ms = 500"), 16,
                         "timeout_ms = 500\ndenied_names = \"refused\"");
  ASSERT_TRUE(daemon_->reload(refused_tables, &error)) << error;
  const DigResult blocked = dig("blocked.allowed.test", "A");
  EXPECT_EQ(blocked.status, "REFUSED") << blocked.raw;
  EXPECT_TRUE(blocked.answers.empty());
  EXPECT_EQ(blocked.ede, "SANDBOX_NETWORK_DENIED: denied_by_rule (blocked.allowed.test)");
  const auto line = audit_for("blocked.allowed.test", "SANDBOX_NETWORK_DENIED");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "rule.name"), "sandboxes.sb1.deny:blocked.allowed.test");
  EXPECT_EQ(upstream_.total_queries(), 0u);
  EXPECT_NE(daemon_->metrics_text().find("sandgate_denials_total{reason=\"no_matching_rule\"} 5"),
            std::string::npos);
}

// Issue 37: a refused name's audit line carries the config line that would let it resolve,
// the name on the sandbox's ports (a question names none: never port 0); a deny rule's none.
TEST_F(ProxyDns, RefusalLineSuggestsTheNameWithoutAPort) {
  dig("suggest-me.test", "A");
  const auto line = audit_for("suggest-me.test", "SANDBOX_NETWORK_DENIED");
  ASSERT_TRUE(line) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line, "labels.suggestion"),
            "[sandboxes.sb1] allow = [\"suggest-me.test\"]");
  dig("blocked.allowed.test", "A");
  const auto blocked = audit_for("blocked.allowed.test", "SANDBOX_NETWORK_DENIED");
  ASSERT_TRUE(blocked) << daemon_->audit_text();
  EXPECT_FALSE(json_string(*blocked, "labels.suggestion"));
}

TEST_F(ProxyDns, ExfiltrationNameNeverLeavesTheHost) {
  const std::string name = "ghp-0123456789abcdefghij.attacker.example";
  for (const auto& type : {"A", "AAAA", "TXT"}) {
    const DigResult r = dig(name, type);
    EXPECT_EQ(r.status, std::string(type) == "TXT" ? "REFUSED" : "NOERROR") << r.raw;
    EXPECT_EQ(r.ede, "SANDBOX_NETWORK_DENIED: no_matching_rule (" + name + ")");
  }
  expect_denial_line(name, "no_matching_rule");
  EXPECT_EQ(upstream_.total_queries(), 0u);
}

TEST_F(ProxyDns, OtherTypesOfAllowedNamesRefused) {
  for (const auto& type : {"MX", "TXT", "HTTPS", "ANY"}) {
    SCOPED_TRACE(type);
    const DigResult r = dig("allowed.test", type);
    EXPECT_EQ(r.status, "REFUSED") << r.raw;
    EXPECT_EQ(r.ede, "SANDBOX_NETWORK_DENIED: only A and AAAA are answered (allowed.test)");
  }
  expect_denial_line("allowed.test", "query_type_not_allowed");
  EXPECT_EQ(upstream_.total_queries(), 0u);
}

TEST_F(ProxyDns, UnknownSourceRefused) {
  const DigResult r = dig("allowed.test", "A", {"-b", "127.0.0.2"});
  EXPECT_EQ(r.status, "REFUSED") << r.raw;
  EXPECT_EQ(r.ede, "SANDBOX_NETWORK_DENIED: unknown_sandbox (allowed.test)");
  expect_denial_line("allowed.test", "unknown_sandbox", "");
  EXPECT_EQ(upstream_.total_queries(), 0u);
}

TEST_F(ProxyDns, UpstreamFailureIsServfail) {
  const DigResult r = dig("servfail.test", "A");
  EXPECT_EQ(r.status, "SERVFAIL") << r.raw;
  const auto line = audit_for("servfail.test", "UPSTREAM_DNS_FAILED");
  ASSERT_TRUE(line) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line, "network.protocol"), "dns");
  EXPECT_EQ(json_string(*line, "labels.sandbox_id"), "sb1");
}

TEST_F(ProxyDns, LargeAnswerTruncatedOverUdpAndCompleteOverTcp) {
  const DigResult udp = dig("many.allowed.test", "A", {"+noedns", "+ignore"});
  EXPECT_EQ(udp.status, "NOERROR") << udp.raw;
  EXPECT_EQ(udp.flags, "qr tc rd ra");
  EXPECT_TRUE(udp.answers.empty());
  const DigResult tcp = dig("many.allowed.test", "A", {"+tcp"});
  EXPECT_EQ(tcp.answers.size(), 40u) << tcp.raw;
}

TEST_F(ProxyDns, MalformedQueriesOverUdp) {
  // Too short for a header: nothing to answer.
  EXPECT_FALSE(udp_exchange(port_, {0x12, 0x34, 0x01, 0x00, 0x00}, 500ms));
  struct Row {
    const char* label;
    Bytes query;
  };
  Bytes loop = raw_query(0x0102, 1, {1, 'a', 0xC0, 0x0C});
  const std::vector<Row> rows = {
      {"two questions", raw_query(0x0101, 2, kAllowedName)},
      {"compression loop", loop},
      {"no question", raw_query(0x0103, 0, {})},
      {"label past the end", raw_query(0x0104, 1, {60, 'a', 'b'})},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    const auto reply = udp_exchange(port_, row.query);
    ASSERT_TRUE(reply);
    EXPECT_EQ(id_of(*reply), static_cast<unsigned>(row.query[0] << 8 | row.query[1]));
    EXPECT_EQ(rcode_of(*reply), 1u);  // FORMERR
    EXPECT_EQ(reply->size(), 12u);
  }
  EXPECT_TRUE(daemon_->wait_audit_code("MALFORMED_REQUEST"));
  EXPECT_EQ(upstream_.total_queries(), 0u);
  expect_still_answering();
}

TEST_F(ProxyDns, TcpFramingPipelinedQueriesAndHugeLength) {
  {
    TcpConn c(port_);
    Bytes two;
    for (std::uint16_t id : {0x0A01, 0x0A02}) {
      const Bytes q = raw_query(id, 1, kAllowedName);
      two.push_back(0);
      two.push_back(static_cast<std::uint8_t>(q.size()));
      two.insert(two.end(), q.begin(), q.end());
    }
    c.send(two);
    const Bytes first = c.read_message();
    const Bytes second = c.read_message();
    EXPECT_EQ(id_of(first), 0x0A01u);
    EXPECT_EQ(rcode_of(first), 0u);
    EXPECT_EQ(ancount_of(first), 1u);
    EXPECT_EQ(id_of(second), 0x0A02u);
  }
  {
    TcpConn c(port_);  // a length no query has: closed without an answer
    c.send({0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8});
    EXPECT_TRUE(c.closed());
  }
  {
    TcpConn c(port_);  // a silent client is closed after limits.header_timeout (1 s)
    const auto start = std::chrono::steady_clock::now();
    set_timeout(c.s.fd, 3000ms);
    EXPECT_TRUE(c.closed());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
  }
  expect_still_answering();
}

// Two sandboxes side by side on one DNS listener (told apart by source address): "a" floods
// it, "b" must not notice. The upstream never answers names under slow.test, a wildcard "a" is
// allowed, so every such query of "a" would wait the whole lookup timeout upstream.
class ProxyDnsNeighbours : public ProxyDns {
 protected:
  static constexpr const char* kFlooder = "127.0.0.3";
  static constexpr const char* kNeighbour = "127.0.0.2";

  void SetUp() override {
    upstream_.add_record("cached.test", "192.0.2.20", 300);
    upstream_.add_record("fresh.test", "192.0.2.21", 300);
    upstream_.add_record("fresh2.test", "192.0.2.22", 300);
    upstream_.set_reply_below("slow.test", FakeDnsServer::Reply::drop);
    SandgateOptions options;
    options.workers = 2;
    options.listeners = "dns = [\"127.0.0.1:0\"]\n";
    tables_ = R"(
[limits]
header_timeout_ms = 8000
max_connections_per_sandbox = 20

[dns]
servers = [")" +
              upstream_.address() +
              R"("]
timeout_ms = 3000

[sandboxes.a]
sources = ["127.0.0.3"]
allow = ["*.slow.test", "cached.test"]

[sandboxes.b]
sources = ["127.0.0.2"]
allow = ["cached.test", "fresh.test", "fresh2.test"]
)";
    options.tables = tables_;
    daemon_ = std::make_unique<SandgateProcess>(options);
    port_ = dns_port();
    ASSERT_NE(port_, 0) << daemon_->stderr_text();
  }

  // dig from one sandbox's source address, with the time it took. Over UDP with one retry
  // after 1 s, as every stub resolver retries: the flood's 5000 queries a second can overflow
  // a listener socket's receive queue in a sanitizer build, and the kernel then drops a
  // neighbour's datagram before the daemon sees it. A starved neighbour fails both tries, and
  // the rows' bound (1.5 s) holds one retry only.
  DigResult dig_from(const char* source, const std::string& name, bool tcp,
                     std::chrono::milliseconds* took = nullptr) const {
    const auto start = std::chrono::steady_clock::now();
    DigResult r = dig(name, "A", {"-b", source, tcp ? "+tcp" : "+notcp", "+tries=2", "+time=1"});
    if (took) {
      *took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    }
    return r;
  }

  std::vector<boost::json::object> lines_with(const std::string& code) const {
    std::vector<boost::json::object> out;
    for (const auto& line : daemon_->audit_lines()) {
      if (json_string(line, "event.code") == code) out.push_back(line);
    }
    return out;
  }

  double errors_of(const std::string& code) const {
    return metric_value(daemon_->metrics_text(), "sandgate_errors_total",
                        {{"code", code}, {"side", "client"}})
        .value_or(0);
  }
};

sockaddr_in address_of(const char* ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// Floods the listener from `source` with A queries for fresh names under slow.test, over
// several sockets (so every worker gets its share), about 5000 a second, until stopped.
// Counts what it sent and the REFUSED replies it got back.
class Flood {
 public:
  Flood(const char* source, std::uint16_t port) {
    const sockaddr_in from = address_of(source, 0);
    for (auto& fd : fds_) {
      fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
      ::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from);
      const sockaddr_in to = loopback(port);
      ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Flood() { stop(); }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    fds_.fill(-1);
  }
  std::size_t sent() const { return sent_; }
  std::size_t refused() const { return refused_; }

 private:
  void run() {
    const auto start = std::chrono::steady_clock::now();
    for (std::uint32_t i = 0; !stop_; ++i) {
      const Bytes q = raw_query(static_cast<std::uint16_t>(i), 1,
                                name_bytes("f" + std::to_string(i) + ".slow.test"));
      ::send(fds_[i % fds_.size()], q.data(), q.size(), 0);
      ++sent_;
      drain();
      // About 5000 queries a second: far more than the lookups the timeout lets finish.
      std::this_thread::sleep_until(start + std::chrono::microseconds(200) * (i + 1));
    }
  }
  void drain() {
    std::array<std::uint8_t, 1500> reply{};
    for (int fd : fds_) {
      for (;;) {
        const ssize_t n = ::recv(fd, reply.data(), reply.size(), 0);
        if (n < 4) break;
        if ((reply[3] & 0x0F) == 5) ++refused_;
      }
    }
  }

  std::array<int, 8> fds_{};
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> sent_{0};
  std::atomic<std::size_t> refused_{0};
  std::thread thread_;
};

TEST_F(ProxyDnsNeighbours, AFloodOfSlowLookupsDoesNotStarveTheNeighbour) {
  ASSERT_EQ(dig_from(kNeighbour, "cached.test", false).status, "NOERROR");  // now cached
  Flood flood(kFlooder, port_);
  // Far more queries of "a" than could be waiting upstream (the old bound: 1024 per worker).
  for (int i = 0; i < 200 && flood.sent() < 4000; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_GE(flood.sent(), 4000u);

  // During the flood: "b" is answered at once, from the cache and from upstream, over UDP and
  // TCP.
  struct Row {
    const char* label;
    const char* source;
    const char* name;
    bool tcp;
  };
  const std::vector<Row> rows = {
      {"b cached over UDP", kNeighbour, "cached.test", false},
      {"b fresh over UDP", kNeighbour, "fresh.test", false},
      {"b fresh over TCP", kNeighbour, "fresh2.test", true},
      {"b cached over TCP", kNeighbour, "cached.test", true},
      // Not a row for "a" asking for cached.test: each worker has its own answer cache, so
      // a's query is a cache hit only when it lands on the worker that b's lookup filled
      // (SO_REUSEPORT picks it by the query's source port); elsewhere it waits for upstream
      // and a's budget is full.
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    std::chrono::milliseconds took{};
    const DigResult r = dig_from(row.source, row.name, row.tcp, &took);
    EXPECT_EQ(r.status, "NOERROR") << r.raw;
    EXPECT_EQ(r.answers.size(), 1u) << r.raw;
    EXPECT_LT(took, 1500ms);
  }
  flood.stop();

  // The excess of "a" was refused and counted, and audited once per burst: a first line and a
  // summary carrying how many were left out.
  EXPECT_GT(flood.refused(), 1000u);
  EXPECT_GE(errors_of("TOO_MANY_DNS_QUERIES"), static_cast<double>(flood.refused()));
  const auto summary = daemon_->wait_audit(
      [](const boost::json::object& o) {
        return json_string(o, "event.code") == "TOO_MANY_DNS_QUERIES" &&
               json_string(o, "event.reason") == "burst_summary";
      },
      10s);
  ASSERT_TRUE(summary) << daemon_->audit_text().substr(0, 4000);
  const auto lines = lines_with("TOO_MANY_DNS_QUERIES");
  EXPECT_LE(lines.size(), 6u);
  std::int64_t left_out = 0;
  for (const auto& line : lines) {
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), "a");
    left_out += json_int(line, "labels.suppressed_lines").value_or(0);
  }
  EXPECT_GT(left_out, 1000);
  const auto suppressed =
      metric_value(daemon_->metrics_text(), "sandgate_audit_lines_suppressed_total");
  EXPECT_GE(suppressed.value_or(0), static_cast<double>(left_out));
  // Nothing of "b" failed.
  for (const auto& line : daemon_->audit_lines()) {
    EXPECT_NE(json_string(line, "labels.sandbox_id"), "b") << boost::json::serialize(line);
  }
}

TEST_F(ProxyDnsNeighbours, ANeighbourHoldingTcpConnectionsDoesNotStopAnother) {
  ASSERT_EQ(dig_from(kNeighbour, "cached.test", false).status, "NOERROR");
  // More connections than the old listener served per worker (512), all from "a".
  std::vector<std::unique_ptr<Fd>> held;
  const sockaddr_in from = address_of(kFlooder, 0);
  const sockaddr_in to = loopback(port_);
  for (int i = 0; i < 1300; ++i) {
    auto fd = std::make_unique<Fd>(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::bind(fd->fd, reinterpret_cast<const sockaddr*>(&from), sizeof from), 0);
    ASSERT_EQ(::connect(fd->fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0) << i;
    held.push_back(std::move(fd));
  }
  // Until the listener has taken them all: those beyond the cap are closed.
  const auto closed_by_peer = [](int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  for (int i = 0; i < 250; ++i) {
    std::size_t closed = 0;
    for (const auto& fd : held) closed += closed_by_peer(fd->fd) ? 1 : 0;
    if (closed >= held.size() - 20) break;
    std::this_thread::sleep_for(20ms);
  }

  for (const bool tcp : {true, false}) {
    SCOPED_TRACE(tcp ? "b over TCP" : "b over UDP");
    std::chrono::milliseconds took{};
    const DigResult r = dig_from(kNeighbour, "cached.test", tcp, &took);
    EXPECT_EQ(r.status, "NOERROR") << r.raw;
    EXPECT_LT(took, 1500ms);
  }

  // "a" kept exactly its connection cap (limits.max_connections_per_sandbox = 20): those are
  // answered, every other one was closed.
  const Bytes q = raw_query(0x0B01, 1, name_bytes("cached.test"));
  Bytes framed = {0, static_cast<std::uint8_t>(q.size())};
  framed.insert(framed.end(), q.begin(), q.end());
  std::size_t answered = 0;
  for (const auto& fd : held) {
    set_timeout(fd->fd, 2000ms);
    if (::send(fd->fd, framed.data(), framed.size(), MSG_NOSIGNAL) < 0) continue;
    std::array<std::uint8_t, 512> reply{};
    const ssize_t n = ::recv(fd->fd, reply.data(), reply.size(), 0);
    if (n > 4 && (reply[5] & 0x0F) == 0) ++answered;
  }
  EXPECT_EQ(answered, 20u);
  EXPECT_GE(errors_of("TOO_MANY_CONNECTIONS"), 1280.0);
  held.clear();
  const auto lines = lines_with("TOO_MANY_CONNECTIONS");
  EXPECT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 4u);
  for (const auto& line : lines) {
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), "a");
    EXPECT_EQ(json_string(line, "network.protocol"), "dns");
  }
}

}  // namespace
}  // namespace sandgate::test
