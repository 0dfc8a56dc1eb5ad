// CONNECT tunnels through the real daemon: TLS to an HTTPS origin with curl, plain HTTP with
// curl -p, and what the tunnel inspects in the client's first bytes (THREATS 4, 7, 11).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/tls_origin.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-connect-7Yp2";
const std::string kAccessDeniedAlert("\x15\x03\x03\x00\x02\x02\x31", 7);

class ProxyConnect : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()}); }

  std::string tables(const std::string& extra_allow = {}) const {
    const std::string t = std::to_string(tls_.port());
    const std::string h = std::to_string(plain_.port());
    return R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 3000
connect_timeout_ms = 1000

[dns.hosts]
"allowed.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]
"plain.test" = ["127.0.0.1"]
"self.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" +
           kToken + R"("
ports = [)" +
           t + R"(]
allow = ["allowed.test:)" +
           t + R"(", "other.test:)" + t + R"(", "plain.test:)" + h + R"(")" + extra_allow + R"(]
allow_cidrs = ["127.0.0.0/8"]
)";
  }

  std::string tls_authority(const std::string& host) const {
    return host + ":" + std::to_string(tls_.port());
  }
  std::string plain_authority() const { return "plain.test:" + std::to_string(plain_.port()); }
  std::string proxy() const { return daemon_->proxy_url(kId, kToken); }
  ::testing::AssertionResult still_serving() const {
    return GoodRequestSucceeds(*daemon_, plain_, "plain.test", kId, kToken);
  }

  // Opens a tunnel and checks the 200.
  RawClient open_tunnel(const std::string& authority) const {
    RawClient c(daemon_->explicit_port());
    EXPECT_TRUE(c.send(proxy_connect(authority, kId, kToken)));
    const auto r = c.read_response(std::chrono::milliseconds(3000), ResponseTo::connect);
    EXPECT_TRUE(r && r->status == 200) << "CONNECT " << authority << " was not established";
    return c;
  }

  // A refused CONNECT: the 403 contract, the reason in body and audit, then close.
  void expect_connect_denied(const std::string& authority, const std::string& reason) {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_connect(authority, kId, kToken)));
    const auto r = c.read_response(std::chrono::milliseconds(3000), ResponseTo::connect);
    ASSERT_TRUE(r) << authority;
    ASSERT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false)) << authority;
    EXPECT_EQ(error_field(*r, "reason"), reason) << authority;
    EXPECT_EQ(error_field(*r, "sandbox"), kId);
    EXPECT_TRUE(c.wait_closed()) << authority;
    const auto line = daemon_->wait_audit([&](const boost::json::object& o) {
      return json_string(o, "event.reason") == reason &&
             json_string(o, "network.protocol") == "connect";
    });
    EXPECT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", reason, kId)) << authority;
  }

  TlsOrigin tls_{{"allowed.test", "other.test", "evil.test"}};
  HttpOrigin plain_;
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyConnect, CurlHttpsThroughTheTunnelReachesTheOriginWithItsSni) {
  const auto r = run_curl({"-x", proxy(), "--cacert", tls_.ca_file(),
                           "https://" + tls_authority("allowed.test") + "/over-tls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.connect_code, 200);
  EXPECT_EQ(r.http_code, 200);
  EXPECT_EQ(r.body, "hello over tls, sni=allowed.test\n");
  EXPECT_EQ(tls_.sni_seen(), std::vector<std::string>{"allowed.test"});
  EXPECT_EQ(tls_.request_lines(), std::vector<std::string>{"GET /over-tls HTTP/1.1"});

  const auto line = daemon_->wait_audit_code("connection_closed");
  ASSERT_TRUE(AuditLineIs(line, "connection_closed", "-", kId));
  EXPECT_EQ(json_string(*line, "event.outcome"), "success");
  EXPECT_EQ(json_string(*line, "network.protocol"), "connect");
  EXPECT_EQ(json_string(*line, "destination.address"), "allowed.test");
  EXPECT_EQ(json_string(*line, "destination.ip"), "127.0.0.1");
  EXPECT_EQ(json_int(*line, "destination.port"), tls_.port());
  EXPECT_GT(json_int(*line, "source.bytes").value_or(0), 0);
  EXPECT_GT(json_int(*line, "destination.bytes").value_or(0), 0);
  EXPECT_GT(json_int(*line, "event.duration").value_or(0), 0);
}

TEST_F(ProxyConnect, CurlPlainHttpThroughTheTunnelCarriesNoProxyHead) {
  const auto r = run_curl({"-p", "-x", proxy(), "http://" + plain_authority() + "/tunnelled"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.connect_code, 200);
  EXPECT_EQ(r.http_code, 200);
  const auto requests = plain_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/tunnelled");
  EXPECT_FALSE(requests[0].has_header("Proxy-Authorization"));
  EXPECT_EQ(plain_.raw_received().find("CONNECT"), std::string::npos);
  EXPECT_EQ(plain_.raw_received().find(kToken), std::string::npos);
}

TEST_F(ProxyConnect, CurlToAnIpLiteralSendsNoSniAndPasses) {
  const auto r = run_curl({"-x", proxy(), "--cacert", tls_.ca_file(),
                           "https://127.0.0.1:" + std::to_string(tls_.port()) + "/ip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 200);
  EXPECT_EQ(tls_.sni_seen(), std::vector<std::string>{""});
}

TEST_F(ProxyConnect, DeniedHostGetsAnExplicit403AndTheOriginIsNeverDialled) {
  expect_connect_denied(tls_authority("denied.test"), "no_matching_rule");
  const auto curl = run_curl(
      {"-x", proxy(), "--cacert", tls_.ca_file(), "https://" + tls_authority("denied.test") + "/"});
  EXPECT_NE(curl.exit_code, 0);
  EXPECT_EQ(curl.connect_code, 403);
  EXPECT_EQ(tls_.connection_count(), 0u);
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, WrongPortOnAnAllowedHostIsRefused) {  // THREATS 11
  for (const std::string port : {"22", "6379"}) {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_connect("allowed.test:" + port, kId, kToken)));
    const auto r = c.read_response(std::chrono::milliseconds(3000), ResponseTo::connect);
    ASSERT_TRUE(r);
    ASSERT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false));
    const auto body = error_body(*r);
    EXPECT_EQ(json_string(*body, "reason"), "port_not_allowed");
    EXPECT_EQ(json_int(*body, "port"), std::stoi(port));
    EXPECT_EQ(json_string(*body, "rule").value_or("").rfind("sandboxes.sb1.allow:allowed.test", 0),
              0u)
        << json_string(*body, "rule").value_or("");
    EXPECT_EQ(json_string(*body, "suggestion"),
              "[sandboxes.sb1] allow = [\"allowed.test:" + port + "\"]");
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "port_not_allowed");
  EXPECT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "port_not_allowed", kId));
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, SniNamingAnotherHostClosesTheTunnelBeforeTheOriginSeesAByte) {  // THREATS 4
  {
    RawClient c = open_tunnel(tls_authority("allowed.test"));
    ASSERT_TRUE(c.send(make_client_hello("evil.test")));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
    EXPECT_EQ(reply, kAccessDeniedAlert);
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_mismatch");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "sni_mismatch", kId));
  EXPECT_EQ(json_string(*line, "tls.client.server_name"), "evil.test");
  EXPECT_EQ(json_string(*line, "destination.address"), "allowed.test");
  EXPECT_EQ(json_string(*line, "network.protocol"), "connect");

  // The same with a real client: curl asked to reach evil.test through allowed.test's tunnel.
  const std::string t = std::to_string(tls_.port());
  const auto curl =
      run_curl({"-x", proxy(), "--cacert", tls_.ca_file(), "--connect-to",
                "evil.test:" + t + ":allowed.test:" + t, "https://evil.test:" + t + "/front"});
  EXPECT_NE(curl.exit_code, 0) << curl.body;
  EXPECT_EQ(curl.connect_code, 200);

  EXPECT_EQ(tls_.connections_with_bytes(), 0u);  // no ClientHello ever reached the origin
  EXPECT_EQ(tls_.handshakes(), 0u);
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, SniOfAnotherHostTheSandboxMayReachIsAccepted) {
  const std::string t = std::to_string(tls_.port());
  const auto curl =
      run_curl({"-x", proxy(), "--cacert", tls_.ca_file(), "--connect-to",
                "other.test:" + t + ":allowed.test:" + t, "https://other.test:" + t + "/"});
  ASSERT_EQ(curl.exit_code, 0) << curl.err;
  EXPECT_EQ(curl.body, "hello over tls, sni=other.test\n");
}

TEST_F(ProxyConnect, ClientHelloWithoutSniToANamedHostIsRefused) {
  {
    RawClient c = open_tunnel(tls_authority("allowed.test"));
    ASSERT_TRUE(c.send(make_client_hello(std::nullopt)));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
    EXPECT_EQ(reply, kAccessDeniedAlert);
  }
  EXPECT_TRUE(AuditLineIs(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_missing"),
                          "SANDBOX_NETWORK_DENIED", "sni_missing", kId));
  EXPECT_EQ(tls_.connections_with_bytes(), 0u);
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, ClientHelloSplitAcrossWritesIsStillInspected) {
  const std::string hello = make_client_hello("evil.test");
  RawClient c = open_tunnel(tls_authority("allowed.test"));
  for (std::size_t i = 0; i < hello.size(); i += 50) {
    ASSERT_TRUE(c.send(hello.substr(i, 50)));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::string reply;
  EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
  EXPECT_EQ(reply, kAccessDeniedAlert);
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_mismatch"));
  EXPECT_EQ(tls_.connections_with_bytes(), 0u);
}

TEST_F(ProxyConnect, ClientHelloSentRightBehindTheConnectHeadIsInspected) {
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_connect(tls_authority("allowed.test"), kId, kToken) +
                       make_client_hello("evil.test")));
    const auto r = c.read_response(std::chrono::milliseconds(3000), ResponseTo::connect);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
    EXPECT_EQ(reply, kAccessDeniedAlert);
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_mismatch"));
  EXPECT_EQ(tls_.connections_with_bytes(), 0u);
}

TEST_F(ProxyConnect, BytesThatStartLikeTlsButAreNotAClientHelloAreRefused) {
  {
    RawClient c = open_tunnel(tls_authority("allowed.test"));
    // A handshake record whose message is a HelloRequest, not a ClientHello.
    ASSERT_TRUE(c.send(std::string("\x16\x03\x01\x00\x04\x00\x00\x00\x00", 9)));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
    EXPECT_EQ(reply, kAccessDeniedAlert);
  }
  EXPECT_TRUE(AuditLineIs(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "tls_malformed"),
                          "SANDBOX_NETWORK_DENIED", "tls_malformed", kId));
  EXPECT_EQ(tls_.connections_with_bytes(), 0u);
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, NestedConnectInsideATunnelIsRefused) {  // THREATS 7
  const std::string nested = "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n" +
                             proxy_auth_line(kId, kToken) + "\r\n";
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send(nested));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
    EXPECT_EQ(reply, "");
  }
  {
    // Split so that no single read holds the whole word.
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send(nested.substr(0, 3)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(c.send(nested.substr(3)));
    EXPECT_TRUE(c.wait_closed());
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "nested_proxy");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "nested_proxy", kId));
  EXPECT_EQ(json_string(*line, "network.protocol"), "connect");
  EXPECT_EQ(plain_.bytes_received(), 0u);  // the origin saw the dial, never a byte
  EXPECT_TRUE(still_serving());
}

// A request with an absolute-form target is a request for a proxy (clients send origin-form
// to origins), so through a tunnel to an open proxy it would reach any host: refused like a
// nested CONNECT, also when split inside the scheme. Origin-form requests pass.
TEST_F(ProxyConnect, AbsoluteFormRequestInsideATunnelIsRefused) {  // THREATS 7
  const std::vector<std::string> proxy_requests = {
      "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      "POST HTTPS://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      "\r\nGET ftp://denied.test/file HTTP/1.1\r\nHost: denied.test\r\n\r\n",
  };
  for (const std::string& request : proxy_requests) {
    RawClient c = open_tunnel(plain_authority());
    const std::size_t split = request.find("://") + 1;  // "GET http:" then "//denied..."
    ASSERT_TRUE(c.send(request.substr(0, split)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.send(request.substr(split));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply)) << request;
    EXPECT_EQ(reply, "") << request;
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "nested_proxy");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "nested_proxy", kId));
  EXPECT_EQ(plain_.bytes_received(), 0u);  // the origin saw the dials, never a byte

  // An origin-form request through the same kind of tunnel is answered.
  RawClient c = open_tunnel(plain_authority());
  ASSERT_TRUE(c.send("GET /fine HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(still_serving());
}

// Lenient parsers (tinyproxy, squid's relaxed mode) act on these spellings of a proxy
// request, so the tunnel's gate must refuse them too.
TEST_F(ProxyConnect, LenientSpellingsOfAProxyRequestInsideATunnelAreRefused) {  // THREATS 7
  const std::vector<std::string> proxy_requests = {
      "GET  http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      "GET\thttp://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      "get http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      " GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
      "CONNECT\tdenied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
      "connect denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n",
  };
  const std::size_t before = daemon_->audit_lines().size();
  for (const std::string& request : proxy_requests) {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send(request));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply)) << request;
    EXPECT_EQ(reply, "") << request;
  }
  const auto refused = [&] {
    std::size_t n = 0;
    const auto lines = daemon_->audit_lines();
    for (std::size_t i = before; i < lines.size(); ++i) {
      n += json_string(lines[i], "event.reason") == "nested_proxy";
    }
    return n;
  };
  EXPECT_TRUE(eventually([&] { return refused() == proxy_requests.size(); }))  // batched writes
      << refused();
  EXPECT_EQ(plain_.bytes_received(), 0u);  // the origin saw the dials, never a byte
  EXPECT_TRUE(still_serving());
}

// A ClientHello whose record header arrives a byte or two at a time, with pauses, is waited
// for and decided like a whole one (it used to pass as "not TLS" after one byte).
TEST_F(ProxyConnect, ClientHelloSplitAfterItsFirstBytesIsStillChecked) {  // THREATS 4
  const std::string hello = make_client_hello("evil.test");
  for (std::size_t first : {1u, 2u, 4u}) {
    RawClient c = open_tunnel(tls_authority("allowed.test"));
    ASSERT_TRUE(c.send(hello.substr(0, first)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(c.send(hello.substr(first)));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply)) << first;
    EXPECT_EQ(reply, kAccessDeniedAlert) << first;
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_mismatch");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "tls.client.server_name"), "evil.test");
  EXPECT_EQ(tls_.connections_with_bytes(), 0u);
  EXPECT_TRUE(still_serving());
}

// The first request's Host inside a plain tunnel must name the tunnel's host (or another host
// the sandbox may reach): a virtual host the policy forbids is not reached through an allowed
// one's tunnel, and a head with two Hosts is not relayed at all.
TEST_F(ProxyConnect, HostNamingAForbiddenHostInsideATunnelIsRefused) {  // THREATS 4
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    ASSERT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false));
    EXPECT_EQ(json_string(*error_body(*r), "reason"), "host_mismatch");
    EXPECT_EQ(json_string(*error_body(*r), "host"), "denied.test");
  }
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "host_mismatch");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "host_mismatch", kId));
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(
        c.send("GET / HTTP/1.1\r\nHost: " + plain_authority() + "\r\nHost: denied.test\r\n\r\n"));
    std::string reply;
    EXPECT_TRUE(c.wait_closed(std::chrono::milliseconds(3000), &reply));
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "http_malformed"));
  EXPECT_EQ(plain_.bytes_received(), 0u);
  // The tunnel's own host, with its port or in another spelling, is answered.
  for (const std::string& host : {plain_authority(), std::string("PLAIN.test.")}) {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET /fine HTTP/1.1\r\nHost: " + host + "\r\n\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r) << host;
    EXPECT_EQ(r->status, 200) << host;
  }
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, ClientVanishingMidTunnelLeavesTheDaemonServing) {
  const std::string big = pattern_bytes(8u << 20, 9);
  plain_.set_handler([&](const RecordedRequest&) { return OriginReply::with_length(200, big); });
  for (int i = 0; i < 3; ++i) {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET /big HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
    EXPECT_FALSE(c.read_exactly(4096).empty());
    c.reset();  // RST while the proxy is still splicing the body into the socket
  }
  EXPECT_TRUE(daemon_->wait_no_connections());
  EXPECT_TRUE(daemon_->alive());
  plain_.set_handler([](const RecordedRequest&) { return OriginReply::with_length(200, "ok"); });
  EXPECT_TRUE(still_serving());
}

TEST_F(ProxyConnect, AHalfClosedTunnelStillDeliversTheResponse) {
  RawClient c = open_tunnel(plain_authority());
  ASSERT_TRUE(c.send("GET /half HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
  c.shutdown_write();
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "origin says: GET /half\n");
  EXPECT_TRUE(c.wait_closed());
  EXPECT_TRUE(daemon_->wait_audit_code("connection_closed"));
}

// Bulk both ways through one tunnel: the relay starts each direction by copying and moves
// to splice(2) once reads fill its buffer; every byte must arrive, in order, and be counted.
TEST_F(ProxyConnect, MegabytesBothWaysArriveIntactAndAreCounted) {
  constexpr std::size_t kSize = 6u << 20;
  const std::string upload = pattern_bytes(kSize, 21);
  const std::string download = pattern_bytes(kSize, 22);
  plain_.set_handler(
      [&](const RecordedRequest&) { return OriginReply::with_length(200, download); });
  const std::string request = "POST /bulk HTTP/1.1\r\nHost: " + plain_authority() +
                              "\r\nContent-Length: " + std::to_string(kSize) + "\r\n\r\n";
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send(request + upload));
    const auto r = c.read_response(std::chrono::milliseconds(10000));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->body == download) << "download corrupted: " << r->body.size() << " bytes";
  }
  {
    // A client that reads late: the relay meets a full destination and must keep what it
    // could not send yet.
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET /late HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto r = c.read_response(std::chrono::milliseconds(10000));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->body == download) << "late download corrupted: " << r->body.size() << " bytes";
  }
  ASSERT_TRUE(plain_.wait_for_requests(2));
  EXPECT_TRUE(plain_.requests()[0].body == upload)
      << "upload corrupted: " << plain_.requests()[0].body.size() << " bytes";
  const auto line = daemon_->wait_audit([](const boost::json::object& o) {  // the upload's
    return json_string(o, "event.code") == "connection_closed" &&
           json_int(o, "source.bytes").value_or(0) > static_cast<std::int64_t>(kSize);
  });
  ASSERT_TRUE(line);
  EXPECT_EQ(json_int(*line, "source.bytes"), static_cast<std::int64_t>(request.size() + kSize));
  const auto down = json_int(*line, "destination.bytes").value_or(0);  // the head, then the body
  EXPECT_GT(down, static_cast<std::int64_t>(kSize));
  EXPECT_LT(down, static_cast<std::int64_t>(kSize + 1024));
}

// A TLS tunnel's download goes to the client by copies, not splices (relay.cpp, copies()):
// every byte must arrive in order, also when the client reads slowly and the relay meets a
// full destination again and again (what it could not send waits in its pipe, then copying
// goes on), and the tunnel is counted as usual.
TEST_F(ProxyConnect, ATlsTunnelsDownloadArrivesIntactAlsoToASlowReader) {
  constexpr std::size_t kSize = 8u << 20;
  const std::string url =
      "https://" + tls_authority("allowed.test") + "/bulk/" + std::to_string(kSize);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--limit-rate", "4M"}}) {
    std::vector<std::string> args = {"-x", proxy(), "--cacert", tls_.ca_file()};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(url);
    const auto r = run_curl(args);
    ASSERT_EQ(r.http_code, 200) << r.err;
    EXPECT_TRUE(r.body == TlsOrigin::bulk_body(kSize))
        << "download corrupted (" << extra.size() << " extra args)";
  }
  const auto line = daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.code") == "connection_closed" &&
           json_int(o, "destination.bytes").value_or(0) > static_cast<std::int64_t>(kSize);
  });
  EXPECT_TRUE(line);
}

// RFC 9112 §2.2: a server SHOULD ignore empty lines before a request line, so an upstream
// proxy at an allowed address accepts "\r\nCONNECT ..." as a CONNECT.
TEST_F(ProxyConnect, NestedConnectAfterLeadingEmptyLinesIsRefused) {  // THREATS 7
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("\r\n" + proxy_connect("denied.test:443", kId, kToken)));
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "nested_proxy"));
  EXPECT_EQ(plain_.raw_received().find("CONNECT"), std::string::npos)
      << "the nested CONNECT reached the upstream";
}

// Empty lines are skipped before looking for a nested CONNECT, but not without end: the
// first-bytes check must not buffer a tunnel's bytes forever.
TEST_F(ProxyConnect, EndlessEmptyLinesInATunnelAreRefused) {  // THREATS 7
  {
    RawClient c = open_tunnel(plain_authority());
    c.send(std::string(70 * 1024, '\n'));
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "unrecognized_protocol"));
  EXPECT_EQ(plain_.raw_received(), "") << "undecided bytes reached the upstream";
  EXPECT_TRUE(still_serving());
}

// Bytes the check has not decided on yet never go upstream, even when the client then
// closes its side: the upstream sees the end of the stream and nothing else.
TEST_F(ProxyConnect, UndecidedFirstBytesAreNotForwardedWhenTheClientLeaves) {  // THREATS 7
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("CONN"));
    c.shutdown_write();
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_EQ(plain_.raw_received(), "") << "undecided bytes reached the upstream";
  EXPECT_TRUE(still_serving());
}

// A relay can open the tunnel with one harmless request and send the CONNECT as the second
// request on the same connection.
TEST_F(ProxyConnect, NestedConnectAfterAFirstPlainRequestIsRefused) {  // THREATS 7
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
    c.send(proxy_connect("denied.test:443", kId, kToken));
    c.wait_closed(std::chrono::milliseconds(1000));
  }
  EXPECT_EQ(plain_.raw_received().find("CONNECT"), std::string::npos)
      << "the nested CONNECT reached the upstream";
}

// Every request of a plain-text tunnel is decided, so the watch follows each body to find
// the next head: a body (Content-Length or chunked) that looks like a proxy request is body,
// and the real request after it is refused.
TEST_F(ProxyConnect, ProxyRequestAfterBodiesInATunnelIsRefused) {  // THREATS 7
  const std::string host = "Host: " + plain_authority() + "\r\n";
  const std::string fake = "CONNECT in-body.test:443 HTTP/1.1\r\n\r\n";
  {
    RawClient c = open_tunnel(plain_authority());
    // Two requests in one write, the first with a body that looks like a CONNECT.
    ASSERT_TRUE(c.send("POST /a HTTP/1.1\r\n" + host +
                       "Content-Length: " + std::to_string(fake.size()) + "\r\n\r\n" + fake +
                       "GET /b HTTP/1.1\r\n" + host + "\r\n"));
    ASSERT_TRUE(c.read_response());
    ASSERT_TRUE(c.read_response());
    // A chunked body cut across writes, then an absolute-form request for another host.
    ASSERT_TRUE(
        c.send("POST /c HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\r\nGET h"));
    ASSERT_TRUE(c.send("\r\n20\r\nttp://in-body.test/ HTTP/1.1\r\n\r\n\r\n0\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
    c.send("GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n");
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "nested_proxy"));
  ASSERT_EQ(plain_.request_count(), 3u);
  EXPECT_EQ(plain_.requests()[0].body, fake);
  EXPECT_EQ(plain_.requests()[2].body, "GET http://in-body.test/ HTTP/1.1\r\n\r\n");
  EXPECT_EQ(plain_.raw_received().find("denied.test/x"), std::string::npos)
      << "the proxy request after the bodies reached the upstream";
  EXPECT_TRUE(still_serving());
}

// A later request's Host is decided like the first one's: another host than the tunnel's
// gets the 403 (the first response is complete, so the refusal is not cut into it).
TEST_F(ProxyConnect, LaterRequestForAnotherHostInATunnelIsRefused) {  // THREATS 4
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET /first HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
    ASSERT_TRUE(c.send("GET /second HTTP/1.1\r\nHost: denied.test\r\n\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false));
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_TRUE(daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.code") == "SANDBOX_NETWORK_DENIED" &&
           json_string(o, "network.protocol") == "connect";
  }));
  ASSERT_TRUE(plain_.wait_for_requests(1));
  EXPECT_EQ(plain_.request_count(), 1u);
  EXPECT_EQ(plain_.raw_received().find("/second"), std::string::npos);
}

// A tunnel that began as HTTP/1 goes on as HTTP/1: bytes of another protocol after a request
// that did not ask to upgrade are refused, not relayed.
TEST_F(ProxyConnect, OtherBytesAfterAPlainRequestInATunnelAreRefused) {  // THREATS 7
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: " + plain_authority() + "\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
    c.send("\x81\x05hello");
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "http_malformed"));
  EXPECT_EQ(plain_.raw_received().find("hello"), std::string::npos);
}

// After a request that asks to upgrade (a WebSocket handshake), what follows is the new
// protocol: it is relayed, and the tunnel ends as a normal one.
TEST_F(ProxyConnect, UpgradedTunnelCarriesTheNewProtocol) {
  plain_.set_handler([](const RecordedRequest&) {
    return OriginReply::raw(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        false);
  });
  {
    RawClient c = open_tunnel(plain_authority());
    ASSERT_TRUE(c.send("GET /ws HTTP/1.1\r\nHost: " + plain_authority() +
                       "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 101);
    ASSERT_TRUE(c.send("\x81\x85masked-frame"));
    EXPECT_TRUE(eventually([&] {
      return plain_.raw_received().find("masked-frame") != std::string::npos;
    })) << "the upgraded stream did not reach the upstream";
  }
  const auto line = daemon_->wait_audit_code("connection_closed");
  EXPECT_TRUE(AuditLineIs(line, "connection_closed", "-", kId));
}

TEST_F(ProxyConnect, ConnectToTheDaemonItselfIsAProxyLoop) {  // THREATS 7
  const std::string self = std::to_string(daemon_->explicit_port());
  const std::string admin = std::to_string(daemon_->admin_port());
  expect_connect_denied("127.0.0.1:" + self, "proxy_loop");
  expect_connect_denied("127.0.0.1:" + admin, "proxy_loop");
  expect_connect_denied("[::ffff:127.0.0.1]:" + self, "proxy_loop");
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_get("127.0.0.1:" + self, "/", kId, kToken)));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    ASSERT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false));
    EXPECT_EQ(error_field(*r, "reason"), "proxy_loop");
    EXPECT_FALSE(error_field(*r, "suggestion"));
  }
  // A name the sandbox may reach on that port, resolving to the listener, is a loop too.
  std::string error;
  ASSERT_TRUE(daemon_->reload(tables(", \"self.test:" + self + "\""), &error)) << error;
  expect_connect_denied("self.test:" + self, "proxy_loop");
  EXPECT_TRUE(still_serving());
}

}  // namespace
}  // namespace sandgate::test
