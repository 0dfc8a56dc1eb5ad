// HTTP/2 floods sent through the real daemon (THREATS 21): a client opens a CONNECT tunnel to
// an inspected host, makes TLS with ALPN h2 against sandgate's leaf (trusting the test CA),
// and sends raw frames (tests/unit/h2/peers/h2_client.py --via). What a mature server does:
// the connection is ended (GOAWAY with the code of the limit, then close), the daemon's
// memory stays bounded, the origin behind it sees a bounded number of requests, an audit line
// and a metric say why, and a normal request on a new connection succeeds right after.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "h2/h2.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-h2flood-Z7q";

// HTTP/2 error codes (RFC 9113 section 7) as the client prints them.
const std::string kProtocolError = "1";
const std::string kInternalError = "2";
const std::string kEnhanceYourCalm = "11";

// The daemon's resident set, in KiB (0 when it cannot be read).
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

class ProxyH2Flood : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto r = run_command({sandgate_binary(), "ca", "init", ca_dir_.file("ca")});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  // The daemon stops cleanly after the flood; in the sanitizer builds that is also where
  // LeakSanitizer reports what a flood-ended connection left behind.
  void TearDown() override {
    if (!daemon_) return;
    const int code = daemon_->stop();
    EXPECT_EQ(code, 0) << daemon_->stderr_text().substr(0, 8000);
    EXPECT_EQ(daemon_->stderr_text().find("Sanitizer"), std::string::npos)
        << daemon_->stderr_text().substr(0, 8000);
  }

  std::string tables() const {
    return R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 5000
connect_timeout_ms = 1000

[dns.hosts]
"api.test" = ["127.0.0.1"]

[interception]
ca_cert = ")" +
           ca_cert() + R"("
ca_key = ")" +
           ca_dir_.file("ca/ca.key") + R"("
upstream_ca_file = ")" +
           roots_ + R"("

[sandboxes.sb1]
token = ")" +
           kToken + R"("
ports = [)" +
           std::to_string(origin_.port()) + R"(]
allow = ["api.test"]
inspect = ["api.test"]
allow_cidrs = ["127.0.0.1/32"]
)";
  }

  std::string ca_cert() const { return ca_dir_.file("ca/ca.pem"); }
  std::string authority() const { return "api.test:" + std::to_string(origin_.port()); }

  // h2_client.py through the daemon: `cmd` and its arguments after the port.
  std::map<std::string, std::string> client(const std::string& cmd,
                                            std::vector<std::string> args = {}) const {
    std::vector<std::string> argv{"--via",
                                  std::to_string(daemon_->explicit_port()),
                                  kId + ":" + kToken,
                                  ca_cert(),
                                  authority(),
                                  cmd,
                                  std::to_string(origin_.port())};
    argv.insert(argv.end(), args.begin(), args.end());
    return h2::test::run_peer(h2::test::h2_client(argv), std::chrono::seconds(60));
  }

  // The daemon still serves: a normal request on a new connection reaches the origin.
  void expect_still_serving() {
    const std::size_t before = origin_.request_count();
    auto kv = client("get", {"/after-the-flood"});
    EXPECT_EQ(kv["exit"], "0") << kv["stderr"];
    EXPECT_EQ(kv["status"], "200") << kv["stderr"];
    EXPECT_EQ(kv["body"], "origin says: GET /after-the-flood");
    EXPECT_EQ(origin_.request_count(), before + 1);
  }

  // The connection's line: HTTP2_CONNECTION_ERROR with `reason`, and its metric.
  void expect_reported(const std::string& reason) {
    const auto line = daemon_->wait_audit_code("HTTP2_CONNECTION_ERROR", reason);
    ASSERT_TRUE(line) << daemon_->audit_text().substr(0, 4000);
    EXPECT_EQ(json_string(*line, "event.outcome"), "failure");
    EXPECT_EQ(json_string(*line, "destination.address"), "api.test");
    EXPECT_EQ(json_string(*line, "http.version"), "2");
    EXPECT_EQ(metric_value(daemon_->metrics_text(), "sandgate_errors_total",
                           {{"code", "HTTP2_CONNECTION_ERROR"}, {"side", "client"}}),
              1);
  }

  // What the flood left in the daemon's memory: well under what it sent or asked for. Not
  // under AddressSanitizer, whose quarantine holds on to freed memory (256 MiB by default):
  // a flood's churn of small allocations (an ACK queued and sent per frame) then shows up as
  // growth, so the bound is checked in the builds without it.
  void expect_memory_bounded(long before_kib) {
    const long after = rss_kib(daemon_->pid());
    ASSERT_GT(after, 0);
#if defined(__SANITIZE_ADDRESS__)
    static_cast<void>(before_kib);
#else
    EXPECT_LT(after - before_kib, 64 * 1024) << "RSS " << before_kib << " -> " << after << " KiB";
#endif
  }

  TempDir ca_dir_;
  const TestCertificate origin_cert_ = make_self_signed_certificate({"api.test"}, {"127.0.0.1"});
  TempDir roots_dir_;
  const std::string roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

// CVE-2023-44487: thousands of streams opened (a complete GET each) and reset at once. The
// connection is ended by the reset limit (GOAWAY ENHANCE_YOUR_CALM from our bucket, or
// INTERNAL_ERROR from nghttp2's); a stream the client reset before its handler ran is never
// decided nor forwarded, so the origin sees (next to) nothing of the flood.
TEST_F(ProxyH2Flood, RapidResetIsCutOffAndReachesTheOriginBoundedly) {
  const long before = rss_kib(daemon_->pid());
  auto kv = client("rapid-reset", {"5000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_TRUE(kv["goaway"] == kEnhanceYourCalm || kv["goaway"] == kInternalError)
      << "goaway=" << kv["goaway"];
  EXPECT_EQ(kv["closed"], "True");
  // Before the codec deferred handlers past the bytes read with the head, this flood made
  // ~180 upstream connections and ~30 requests; a stream reset in the same read starts
  // nothing now (one connection: sandgate's first dial, to learn the origin's protocol).
  EXPECT_LT(origin_.request_count(), 20u);
  EXPECT_LT(origin_.connection_count(), 20u);
  expect_reported("stream_reset_flood");
  expect_memory_bounded(before);
  expect_still_serving();
}

// A client that resets a few streams is no flood: nothing is reported.
TEST_F(ProxyH2Flood, AFewResetsAreNotAFlood) {
  auto kv = client("rapid-reset", {"100", "1"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], "none");
  expect_still_serving();
  EXPECT_EQ(daemon_->audit_text().find("HTTP2_CONNECTION_ERROR"), std::string::npos);
}

// CVE-2024-27316 class: a header block that never ends, each CONTINUATION adding a field.
TEST_F(ProxyH2Flood, ContinuationFloodWithGrowingHeadersEndsTheConnection) {
  const long before = rss_kib(daemon_->pid());
  auto kv = client("continuation", {"20000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], kEnhanceYourCalm);
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_EQ(origin_.request_count(), 0u);
  expect_reported("continuation_flood");
  expect_memory_bounded(before);
  expect_still_serving();
}

// The same with empty CONTINUATION frames (no header data at all).
TEST_F(ProxyH2Flood, ContinuationFloodOfEmptyFramesEndsTheConnection) {
  auto kv = client("continuation", {"20000", "empty"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], kEnhanceYourCalm);
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_EQ(origin_.request_count(), 0u);
  expect_reported("continuation_flood");
  expect_still_serving();
}

// An HPACK bomb: one 4 KB field enters the dynamic table, then 100000 one-byte references to
// it follow in the same block (about 400 MB once decompressed, from about 100 KB on the
// wire). The head is over max_header_list_bytes: 431, nothing forwarded, the fields past the
// limit never held; the connection goes on and serves the next request.
TEST_F(ProxyH2Flood, HpackBombIs431AndNeverForwarded) {
  const long before = rss_kib(daemon_->pid());
  auto kv = client("hpack-bomb", {"100000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["status"], "431");
  EXPECT_EQ(kv["after_status"], "200");
  EXPECT_EQ(kv["goaway"], "none");
  ASSERT_EQ(origin_.request_count(), 1u);  // the request after the bomb only
  EXPECT_EQ(origin_.requests()[0].target, "/after-bomb");
  EXPECT_FALSE(origin_.requests()[0].has_header("x-bomb"));
  const auto line = daemon_->wait_audit_code("REQUEST_HEADERS_TOO_LARGE");
  ASSERT_TRUE(line) << daemon_->audit_text().substr(0, 4000);
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 431);
  expect_memory_bounded(before);
}

// SETTINGS frames whose ACKs the client never reads: nghttp2 stops at max_outbound_ack queued
// ACKs and the connection ends. Its GOAWAY cannot get through to a client that reads nothing:
// what is still unsent after the lingering close is dropped with a reset, so the client sees
// the connection end either way.
TEST_F(ProxyH2Flood, SettingsFloodEndsTheConnection) {
  const long before = rss_kib(daemon_->pid());
  auto kv = client("settings-flood", {"3000000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["closed"], "True") << "sent=" << kv["sent"];
  EXPECT_TRUE(kv["goaway"] == kEnhanceYourCalm || kv["goaway"] == "none") << kv["goaway"];
  EXPECT_LT(std::stol(kv["sent"]), 3000000);
  expect_reported("control_frame_flood");
  expect_memory_bounded(before);
  expect_still_serving();
}

// The same with PINGs. (This was disabled for failing one run in seven by the idle timeout.
// The codec was not at fault: it kept reading, and the client's kernel had stopped sending,
// a loopback TCP stall that h2_client.py's tcp_connect explains and avoids.)
TEST_F(ProxyH2Flood, PingFloodEndsTheConnection) {
  const long before = rss_kib(daemon_->pid());
  auto kv = client("ping-flood", {"3000000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["closed"], "True") << "sent=" << kv["sent"];
  EXPECT_TRUE(kv["goaway"] == kEnhanceYourCalm || kv["goaway"] == "none") << kv["goaway"];
  EXPECT_LT(std::stol(kv["sent"]), 3000000);
  expect_reported("control_frame_flood");
  expect_memory_bounded(before);
  expect_still_serving();
}

// Zero-length DATA frames on an open stream cost the server a frame each and carry nothing
// (CVE-2019-9518): after max_empty_frames in a row the connection is ended.
TEST_F(ProxyH2Flood, EmptyDataFloodEndsTheConnection) {
  auto kv = client("empty-data", {"1000000"});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], kEnhanceYourCalm);
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_LT(std::stol(kv["sent"]), 1000000);
  EXPECT_EQ(origin_.request_count(), 0u);  // its body never ended: nothing forwarded
  expect_reported("empty_frame_flood");
  expect_still_serving();
}

// Once the client has acknowledged SETTINGS_MAX_CONCURRENT_STREAMS, a stream beyond it is a
// connection error (PROTOCOL_ERROR); the streams it held open never reached the origin.
TEST_F(ProxyH2Flood, MoreStreamsThanAdvertisedEndsTheConnection) {
  const std::uint32_t limit = h2::Settings{}.max_concurrent_streams;
  auto kv = client("streams", {std::to_string(limit + 50)});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["limit"], std::to_string(limit));
  EXPECT_EQ(kv["goaway"], kProtocolError);
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_EQ(origin_.request_count(), 0u);
  expect_reported("too_many_streams");
  expect_still_serving();
}

// As many streams as advertised are fine.
TEST_F(ProxyH2Flood, StreamsUpToTheLimitAreServed) {
  auto kv = client("streams", {std::to_string(h2::Settings{}.max_concurrent_streams)});
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], "none");
  EXPECT_EQ(kv["refused"], "0");
  EXPECT_EQ(daemon_->audit_text().find("HTTP2_CONNECTION_ERROR"), std::string::npos);
}

}  // namespace
}  // namespace sandgate::test
