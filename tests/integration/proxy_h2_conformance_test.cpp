// HTTP/2 stream states and framing through the real daemon's interception (RFC 9113 sections
// 5.1 and 5.1.1), as h2spec checks them: a client opens a CONNECT tunnel to an inspected host,
// makes TLS with ALPN h2 against sandgate's leaf, and sends raw frames
// (tests/unit/h2/peers/h2_client.py --via, `conformance CASE` and `framing`). Each case names
// the h2spec case it mirrors; h2spec itself is run by hand (docs/interception.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-h2conf-Q4w";

// HTTP/2 error codes (RFC 9113 section 7) as the client prints them.
const std::string kProtocolError = "1";
const std::string kStreamClosed = "5";

class ProxyH2Conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto r = run_command({sandgate_binary(), "ca", "init", ca_dir_.file("ca")});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  void TearDown() override {
    if (!daemon_) return;
    EXPECT_EQ(daemon_->stop(), 0) << daemon_->stderr_text().substr(0, 8000);
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
           ca_dir_.file("ca/ca.pem") + R"("
ca_key = ")" +
           ca_dir_.file("ca/ca.key") + R"("
upstream_ca_file = ")" +
           roots_ + R"("

[sandboxes.sb1]
token = ")" +
           kToken + R"("
ports = [)" +
           std::to_string(origin_.port()) + ", " + std::to_string(h2_port_) + R"(]
allow = ["api.test"]
inspect = ["api.test"]
allow_cidrs = ["127.0.0.1/32"]
)";
  }

  // h2_client.py through the daemon to api.test:port: `cmd` and its arguments.
  std::map<std::string, std::string> client(std::uint16_t port, const std::string& cmd,
                                            std::vector<std::string> args = {}) const {
    std::vector<std::string> argv{"--via",
                                  std::to_string(daemon_->explicit_port()),
                                  kId + ":" + kToken,
                                  ca_dir_.file("ca/ca.pem"),
                                  "api.test:" + std::to_string(port),
                                  cmd,
                                  std::to_string(port)};
    argv.insert(argv.end(), args.begin(), args.end());
    return h2::test::run_peer(h2::test::h2_client(argv), std::chrono::seconds(30));
  }

  // An HTTP/2 origin (nghttpd) on h2_port_ serving www/data.txt.
  std::unique_ptr<h2::test::BackgroundPeer> start_h2_origin() {
    const std::string key = roots_dir_.write("origin.key", origin_cert_.key_pem);
    std::filesystem::create_directories(roots_dir_.file("www"));
    roots_dir_.write("www/data.txt", "payload from an h2 origin\n");
    auto peer = std::make_unique<h2::test::BackgroundPeer>(
        std::vector<std::string>{"nghttpd", "-a", "127.0.0.1", "-d", roots_dir_.file("www"),
                                 std::to_string(h2_port_), key, roots_});
    EXPECT_TRUE(h2::test::wait_listening(h2_port_));
    return peer;
  }

  TempDir ca_dir_;
  const TestCertificate origin_cert_ = make_self_signed_certificate({"api.test"}, {"127.0.0.1"});
  TempDir roots_dir_;
  const std::string roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  const std::uint16_t h2_port_ = h2::test::free_port();
  std::unique_ptr<SandgateProcess> daemon_;
};

// A frame on a stream the client closed (END_STREAM sent, or RST_STREAM) is answered, as
// RFC 9113 section 5.1 says: GOAWAY STREAM_CLOSED (nghttp2 makes each a connection error;
// h2spec accepts a stream error too, but its 5.1/12 asks for the connection error).
struct ClosedStreamCase {
  const char* name;  // h2_client.py's case
  const char* h2spec;
};

TEST_F(ProxyH2Conformance, FramesOnAClosedStreamAreStreamClosed) {
  const std::vector<ClosedStreamCase> cases = {
      {"closed-data-after-rst", "http2/5.1/8: DATA after the client's RST_STREAM"},
      {"closed-headers-after-rst", "http2/5.1/9: HEADERS after the client's RST_STREAM"},
      {"half-closed-data", "http2/5.1/5: DATA after END_STREAM, response not yet sent"},
      {"closed-data", "http2/5.1/11: DATA after the stream ended both ways"},
      {"closed-headers", "http2/5.1/12: HEADERS after the stream ended both ways"},
  };
  for (const auto& c : cases) {
    auto kv = client(origin_.port(), "conformance", {c.name});
    EXPECT_EQ(kv["exit"], "0") << c.h2spec << ": " << kv["stderr"];
    EXPECT_EQ(kv["goaway"], kStreamClosed) << c.h2spec << " rst=" << kv["rst"];
    EXPECT_EQ(kv["closed"], "True") << c.h2spec;
  }
  // Control: a normal request on a new connection is served.
  auto kv = client(origin_.port(), "get", {"/after"});
  EXPECT_EQ(kv["status"], "200") << kv["stderr"];
  EXPECT_EQ(kv["body"], "origin says: GET /after");
}

// RFC 9113 section 5.1.1: HEADERS on stream 3 after stream 5 opened (3 was skipped, so it can
// never open) is a connection error PROTOCOL_ERROR (h2spec http2/5.1.1/2). Control: streams
// in rising order on one connection are served.
TEST_F(ProxyH2Conformance, HeadersOnASkippedLowerStreamIdIsProtocolError) {
  auto kv = client(origin_.port(), "conformance", {"lower-stream-id"});
  EXPECT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], kProtocolError);
  EXPECT_EQ(kv["closed"], "True");
  kv = client(origin_.port(), "parallel", {"3", "/rising"});
  EXPECT_EQ(kv["statuses"], "200 200 200") << kv["stderr"];
}

// A relayed response ends with its last frame: the DATA frame with the body's last bytes
// carries END_STREAM, and a body-less response ends with its HEADERS; no empty DATA frame
// follows (h2spec shows one as "DATA Frame (length:0, flags:0x01)"). From an HTTP/1.1 origin
// (Content-Length) and from an HTTP/2 origin.
struct FramingCase {
  const char* what;
  bool h2_origin;
  const char* method;
  const char* path;
  const char* end_on;  // the frame that carries END_STREAM
  const char* data_frames;
};

TEST_F(ProxyH2Conformance, ResponsesEndWithTheirLastFrame) {
  origin_.set_handler([](const RecordedRequest& r) {
    if (r.target == "/no-content") return OriginReply::with_length(204, "");
    // A HEAD is answered with the head only: Content-Length 0 here, as the origin sends no body.
    if (r.method == "HEAD") return OriginReply::with_length(200, "");
    return OriginReply::with_length(200, std::string(100, 'x'));
  });
  const auto h2_origin = start_h2_origin();
  const std::vector<FramingCase> cases = {
      {"h1 origin, a body", false, "GET", "/body", "data", "1"},
      {"h1 origin, 204", false, "GET", "/no-content", "headers", "0"},
      {"h1 origin, HEAD", false, "HEAD", "/body", "headers", "0"},
      {"h2 origin, a body", true, "GET", "/data.txt", "data", "1"},
      {"h2 origin, HEAD", true, "HEAD", "/data.txt", "headers", "0"},
  };
  for (const auto& c : cases) {
    auto kv = client(c.h2_origin ? h2_port_ : origin_.port(), "framing", {c.method, c.path});
    EXPECT_EQ(kv["exit"], "0") << c.what << ": " << kv["stderr"];
    EXPECT_EQ(kv["status"], c.path == std::string("/no-content") ? "204" : "200") << c.what;
    EXPECT_EQ(kv["end_on"], c.end_on) << c.what;
    EXPECT_EQ(kv["empty_end"], "0") << c.what;
    EXPECT_EQ(kv["data_frames"], c.data_frames) << c.what;
    EXPECT_EQ(kv["goaway"], "none") << c.what;
    // Its line says it completed (a body-less response from an HTTP/1.1 origin was logged
    // as a failure before).
    const auto line = daemon_->wait_audit([&](const boost::json::object& o) {
      return json_string(o, "event.code") == "http_request" &&
             json_string(o, "http.request.method") == c.method &&
             json_string(o, "url.path") == c.path;
    });
    ASSERT_TRUE(line) << c.what << "\n" << daemon_->audit_text().substr(0, 4000);
    EXPECT_EQ(json_string(*line, "event.outcome"), "success") << c.what;
  }
}

}  // namespace
}  // namespace sandgate::test
