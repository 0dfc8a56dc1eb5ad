// Upstream failures through the real daemon: refused connections, DNS failures and timeouts,
// silent and broken origins, each with its exact code, status and retry flag.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "support/fake_dns_server.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/sequence_dns_server.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-upstream-P5d1";

// One daemon whose resolver is a FakeDnsServer, so every DNS outcome is scripted.
class ProxyUpstream : public ::testing::Test {
 protected:
  void SetUp() override {
    dns_.add_record("resolved.test", "127.0.0.1", 60);
    dns_.set_reply("nxdomain.test", FakeDnsServer::Reply::nxdomain);
    dns_.set_reply("servfail.test", FakeDnsServer::Reply::servfail);
    dns_.set_reply("silent.test", FakeDnsServer::Reply::drop);
    const std::string p = std::to_string(origin_.port());
    const std::string closed = std::to_string(closed_port_);
    SandgateOptions options;
    options.tables = R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 500
connect_timeout_ms = 500

[dns]
servers = [")" + dns_.address() +
                     R"("]
timeout_ms = 300

[dns.hosts]
"origin.test" = ["127.0.0.1"]
"closed.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken +
                     R"("
ports = [)" + p + ", " +
                     closed + R"(]
allow = ["origin.test", "closed.test", "resolved.test", "nxdomain.test", "servfail.test",
         "silent.test"]
allow_cidrs = ["127.0.0.0/8"]
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::string at(const std::string& host) const {
    return host + ":" + std::to_string(origin_.port());
  }

  // One request (GET or CONNECT, or a POST of two bytes) that must fail with `code`; returns
  // the elapsed time.
  std::chrono::steady_clock::duration expect_failure(const std::string& authority, bool connect,
                                                     int status, const std::string& code,
                                                     bool retryable, bool post = false) {
    SCOPED_TRACE((connect ? "CONNECT " : post ? "POST " : "GET ") + authority);
    const std::size_t lines_before = daemon_->audit_lines().size();
    const auto start = std::chrono::steady_clock::now();
    RawClient c(daemon_->explicit_port());
    std::string request =
        connect ? proxy_connect(authority, kId, kToken)
                : proxy_get(authority, "/x", kId, kToken, post ? "Content-Length: 2\r\n" : "");
    if (post) request = "POST" + request.substr(3) + "hi";
    EXPECT_TRUE(c.send(request));
    const auto r = c.read_response(5000ms, connect ? ResponseTo::connect : ResponseTo::other);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (!r) {
      ADD_FAILURE() << "no response";
      return elapsed;
    }
    EXPECT_TRUE(IsSandgateError(*r, status, code, retryable));
    const auto body = error_body(*r);
    if (body) {
      EXPECT_EQ(json_string(*body, "sandbox"), kId);
      EXPECT_EQ(json_string(*body, "host"), authority.substr(0, authority.rfind(':')));
    }
    EXPECT_TRUE(c.wait_closed());
    const auto line = daemon_->wait_audit(
        [&](const boost::json::object& o) { return json_string(o, "event.code") == code; }, 3000ms,
        lines_before);
    EXPECT_TRUE(AuditLineIs(line, code, "-", kId));
    if (line) {
      EXPECT_EQ(json_int(*line, "http.response.status_code"), status);
      EXPECT_EQ(json_string(*line, "network.protocol"), connect ? "connect" : "http");
    }
    EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", kId, kToken));
    return elapsed;
  }

  FakeDnsServer dns_;
  HttpOrigin origin_;
  std::uint16_t closed_port_ = closed_tcp_port();
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyUpstream, NamesResolvedThroughTheConfiguredServerAreReached) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_get(at("resolved.test"), "/dns", kId, kToken)));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(dns_.queries("resolved.test"), 1u);
}

TEST_F(ProxyUpstream, RefusedConnectionIs502UpstreamConnectFailed) {
  const std::string authority = "closed.test:" + std::to_string(closed_port_);
  expect_failure(authority, false, 502, "UPSTREAM_CONNECT_FAILED", true);
  expect_failure(authority, true, 502, "UPSTREAM_CONNECT_FAILED", true);
}

TEST_F(ProxyUpstream, NxdomainAndServfailAre502UpstreamDnsFailed) {
  expect_failure(at("nxdomain.test"), false, 502, "UPSTREAM_DNS_FAILED", true);
  expect_failure(at("servfail.test"), true, 502, "UPSTREAM_DNS_FAILED", true);
}

TEST_F(ProxyUpstream, DnsServerThatNeverAnswersIs504UpstreamTimeout) {
  // docs/errors.md: "DNS or connect past its deadline" is UPSTREAM_TIMEOUT.
  const auto elapsed = expect_failure(at("silent.test"), false, 504, "UPSTREAM_TIMEOUT", true);
  EXPECT_LE(elapsed, 2500ms);
  expect_failure(at("silent.test"), true, 504, "UPSTREAM_TIMEOUT", true);
}

TEST_F(ProxyUpstream, OriginThatNeverAnswersIs504UpstreamTimeout) {
  origin_.set_handler([](const RecordedRequest& r) {
    return r.target == "/x" ? OriginReply::silence() : OriginReply::with_length(200, "ok");
  });
  const auto elapsed = expect_failure(at("origin.test"), false, 504, "UPSTREAM_TIMEOUT", true);
  EXPECT_GE(elapsed, 400ms);
  EXPECT_LE(elapsed, 2500ms);
}

TEST_F(ProxyUpstream, OriginSendingGarbageIs502UpstreamProtocolError) {
  origin_.set_handler([](const RecordedRequest& r) {
    return r.target == "/x" ? OriginReply::raw("SSH-2.0-OpenSSH_9.2\r\n\r\n", true)
                            : OriginReply::with_length(200, "ok");
  });
  expect_failure(at("origin.test"), false, 502, "UPSTREAM_PROTOCOL_ERROR", false);
}

TEST_F(ProxyUpstream, OriginResponseWithBothFramingHeadersIsAProtocolError) {
  origin_.set_handler([](const RecordedRequest& r) {
    return r.target == "/x" ? OriginReply::raw(
                                  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                                  true)
                            : OriginReply::with_length(200, "ok");
  });
  expect_failure(at("origin.test"), false, 502, "UPSTREAM_PROTOCOL_ERROR", false);
}

// The destination may have acted on a request it closed on without answering: only an
// idempotent one is retryable (RFC 9110 9.2.2).
TEST_F(ProxyUpstream, OriginClosingWithoutAResponseIs502UpstreamConnectFailed) {
  origin_.set_handler([](const RecordedRequest& r) {
    return r.target == "/x" ? OriginReply::close_now() : OriginReply::with_length(200, "ok");
  });
  expect_failure(at("origin.test"), false, 502, "UPSTREAM_CONNECT_FAILED", true);
  expect_failure(at("origin.test"), false, 502, "UPSTREAM_CONNECT_FAILED", false, true);
  ASSERT_EQ(origin_.request_count(), 4u);  // each failure, then GoodRequestSucceeds' request
  EXPECT_EQ(origin_.requests()[2].method, "POST");
  EXPECT_EQ(origin_.requests()[2].body, "hi");
}

TEST_F(ProxyUpstream, UnrequestedProtocolSwitchIs502UpstreamProtocolError) {
  origin_.set_handler([](const RecordedRequest& r) {
    return r.target == "/x" ? OriginReply::raw(
                                  "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                                  "Connection: Upgrade\r\n\r\n",
                                  false)
                            : OriginReply::with_length(200, "ok");
  });
  expect_failure(at("origin.test"), false, 502, "UPSTREAM_PROTOCOL_ERROR", false);
}

TEST_F(ProxyUpstream, AStaleKeptAliveUpstreamIsReplacedTransparently) {
  origin_.set_handler([](const RecordedRequest& r) {
    OriginReply reply = OriginReply::with_length(200, "conn " + std::to_string(r.connection));
    reply.close_after = r.target == "/first";  // closes without saying Connection: close
    return reply;
  });
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_get(at("origin.test"), "/first", kId, kToken)));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "conn 1");
  std::this_thread::sleep_for(200ms);  // the origin's close reaches the proxy
  ASSERT_TRUE(c.send(proxy_get(at("origin.test"), "/second", kId, kToken)));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "conn 2");
}

TEST_F(ProxyUpstream, ASlowButSteadyResponseIsNotCutByTheIdleTimeout) {
  // idle_timeout_ms = 500: a body that takes 1.5 s in total but never pauses for more than
  // 250 ms is not idle, and must arrive whole.
  const std::string body = "0123456789";
  origin_.set_handler(
      [&](const RecordedRequest&) { return OriginReply::chunked(200, body, 2, 250ms); });
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_get(at("origin.test"), "/slow", kId, kToken)));
  const auto r = c.read_response(5000ms);
  ASSERT_TRUE(r) << "the response was cut";
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
}

TEST_F(ProxyUpstream, ASlowButSteadyUploadIsNotCutByTheIdleTimeout) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send("POST http://" + at("origin.test") +
                     "/upload HTTP/1.1\r\nHost: " + at("origin.test") + "\r\n" +
                     proxy_auth_line(kId, kToken) + "Content-Length: 6\r\n\r\n"));
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(250ms);
    ASSERT_TRUE(c.send("u"));
  }
  const auto r = c.read_response(5000ms);
  ASSERT_TRUE(r) << "the upload was cut";
  EXPECT_EQ(r->status, 200);
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].body, "uuuuuu");
}

TEST_F(ProxyUpstream, AnIdleTunnelIsClosedAfterTheIdleTimeout) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_connect(at("origin.test"), kId, kToken)));
  const auto r = c.read_response(5000ms, ResponseTo::connect);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.wait_closed(3000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  EXPECT_TRUE(daemon_->wait_audit_code("connection_closed"));
}

// The brief's own form of the DNS timeout: a resolver address where a UDP socket is bound but
// never answers.
TEST(ProxyUpstreamSilentResolver, LookupPastItsDeadlineIsUpstreamTimeout) {
  SilentUdpSocket silent;
  HttpOrigin origin;
  SandgateOptions options;
  options.tables = R"(
[dns]
servers = ["127.0.0.1:)" +
                   std::to_string(silent.port()) + R"("]
timeout_ms = 200

[dns.hosts]
"origin.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken +
                   R"("
allow = ["*.test:)" +
                   std::to_string(origin.port()) + R"("]
allow_cidrs = ["127.0.0.0/8"]
)";
  SandgateProcess daemon(options);
  RawClient c(daemon.explicit_port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      c.send(proxy_get("unlisted.test:" + std::to_string(origin.port()), "/", kId, kToken)));
  const auto r = c.read_response(5000ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 504, "UPSTREAM_TIMEOUT", true));
  EXPECT_LE(std::chrono::steady_clock::now() - start, 2000ms);
  EXPECT_TRUE(
      AuditLineIs(daemon.wait_audit_code("UPSTREAM_TIMEOUT"), "UPSTREAM_TIMEOUT", "-", kId));
  EXPECT_TRUE(GoodRequestSucceeds(daemon, origin, "origin.test", kId, kToken));
}

}  // namespace
}  // namespace sandgate::test
