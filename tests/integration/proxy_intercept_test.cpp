// TLS interception through the real daemon: a CA made by `sandgate ca init`, hosts marked with
// `inspect`, real curl through CONNECT against HTTPS origins (tests/support/http_origin with a
// certificate of its own, trusted by sandgate through upstream_ca_file). What the client sees,
// what the origin receives (sandgate's own TLS and requests), and the audit lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-intercept-Q4x";

// The CA every test of this file intercepts with, made by the real CLI.
struct Ca {
  Ca() {
    const auto r = run_command({sandgate_binary(), "ca", "init", dir.file("ca")});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  std::string cert() const { return dir.file("ca/ca.pem"); }
  std::string key() const { return dir.file("ca/ca.key"); }
  TempDir dir;
};

class ProxyIntercept : public ::testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()}); }

  std::string tables() const {
    const std::string p = std::to_string(origin_.port());
    const std::string b = std::to_string(impostor_.port());
    return R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 3000
connect_timeout_ms = 1000

[dns.hosts]
"api.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"spliced.test" = ["127.0.0.1"]
"impostor.test" = ["127.0.0.1"]
"wrongname.test" = ["127.0.0.1"]

[interception]
ca_cert = ")" +
           ca_.cert() +
           R"("
ca_key = ")" +
           ca_.key() +
           R"("
upstream_ca_file = ")" +
           upstream_roots_ +
           R"("

[sandboxes.sb1]
token = ")" +
           kToken +
           R"("
ports = [)" +
           p + ", " + b +
           R"(]
allow = ["api.test", "other.test", "spliced.test", "impostor.test", "wrongname.test"]
inspect = ["api.test", "other.test", "impostor.test", "wrongname.test"]
allow_cidrs = ["127.0.0.1/32"]
)";
  }

  std::string url(const std::string& host, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(origin_.port()) + path;
  }
  std::string proxy() const { return daemon_->proxy_url(kId, kToken); }
  // Waits until the daemon has closed every client connection (and so given its idle
  // upstream connections to the pool).
  void settle() const {
    ASSERT_TRUE(eventually(
        [&] { return metric_value(daemon_->metrics_text(), "sandgate_active_connections") == 0; }));
  }
  // curl through the proxy, trusting sandgate's CA.
  CurlResult curl(std::vector<std::string> args) const {
    std::vector<std::string> all = {"--http1.1", "-x", proxy(), "--cacert", ca_.cert()};
    all.insert(all.end(), args.begin(), args.end());
    return run_curl(all);
  }

  Ca ca_;
  const TestCertificate origin_cert_ =
      make_self_signed_certificate({"api.test", "other.test", "spliced.test"}, {"127.0.0.1"});
  // Valid for its name, but signed by nobody sandgate trusts.
  const TestCertificate impostor_cert_ = make_self_signed_certificate({"impostor.test"}, {});
  TempDir roots_dir_;
  const std::string upstream_roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  const std::string origin_ca_ = roots_dir_.write("origin.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  HttpOrigin impostor_{"127.0.0.1", 0, impostor_cert_};
  std::unique_ptr<SandgateProcess> daemon_;

  // curl --http2 through the proxy with `args` (ending in the URL) gets the error reply
  // `status` with `code` and `retryable`; its audit line names `path` and `termination`.
  void ExpectHttp2Failure(const std::vector<std::string>& args, int status, const std::string& code,
                          bool retryable, const std::string& path, const std::string& termination) {
    SCOPED_TRACE(args.back() + " " + std::to_string(args.size()));
    std::vector<std::string> all = {"--http2", "-x", proxy(), "--cacert", ca_.cert()};
    all.insert(all.end(), args.begin(), args.end());
    const std::size_t lines_before = daemon_->audit_lines().size();
    const auto r = run_curl(all);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.http_code, status) << r.body;
    const auto body = parse_object(r.body);
    ASSERT_TRUE(body) << r.body;
    EXPECT_EQ(json_string(*body, "code"), code);
    const auto* shown = json_at(*body, "retryable");
    ASSERT_NE(shown, nullptr);
    EXPECT_EQ(shown->as_bool(), retryable) << r.body;
    const auto line = daemon_->wait_audit(
        [&](const boost::json::object& l) { return json_string(l, "event.code") == code; },
        std::chrono::milliseconds(3000), lines_before);
    ASSERT_TRUE(line);
    EXPECT_EQ(json_string(*line, "http.request.method"), args.size() == 1 ? "GET" : "POST");
    EXPECT_EQ(json_string(*line, "url.path"), path);
    EXPECT_EQ(json_string(*line, "labels.termination"), termination);
  }

  // curl --http2 through the proxy: `silent` (a destination that never answers) gets 504 once
  // idle_timeout_ms has passed, then `after` its 200 over the same connection (no new
  // connect); the 504's line names the path and the timeout.
  void ExpectSilentStreamEndsAlone(const std::string& silent, const std::string& after) {
    const auto r = run_command({"curl", "-q", "-sS", "--noproxy", "", "--http2", "-x", proxy(),
                                "--cacert", ca_.cert(), "-w", "%{http_code} %{num_connects}\n",
                                "-o", "/dev/null", silent, "-o", "/dev/null", after});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "504 1\n200 0\n") << r.err;
    const auto line = daemon_->wait_audit_code("UPSTREAM_TIMEOUT");
    ASSERT_TRUE(line);
    EXPECT_EQ(json_string(*line, "url.path"), "/silent");
    EXPECT_EQ(json_string(*line, "labels.termination"), "timeout");
  }
};

TEST_F(ProxyIntercept, AnInspectedHostIsServedUnderTheCaAndEachRequestIsLogged) {
  const auto r = curl({url("api.test", "/repos/acme/widgets?token=secret-query")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 200);
  EXPECT_EQ(r.body, "origin says: GET /repos/acme/widgets?token=secret-query\n");
  // sandgate's own connection: SNI = the host, and the request in origin form with its Host.
  EXPECT_EQ(origin_.sni_seen(), std::vector<std::string>{"api.test"});
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].header("Host"), "api.test:" + std::to_string(origin_.port()));
  EXPECT_FALSE(requests[0].has_header("Proxy-Authorization"));

  const auto line = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(AuditLineIs(line, "http_request", "-", kId));
  EXPECT_EQ(json_string(*line, "event.outcome"), "success");
  EXPECT_EQ(json_string(*line, "url.scheme"), "https");
  EXPECT_EQ(json_string(*line, "url.path"), "/repos/acme/widgets");  // never the query
  EXPECT_EQ(json_string(*line, "http.request.method"), "GET");
  EXPECT_EQ(json_string(*line, "http.version"), "1.1");
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 200);
  EXPECT_EQ(json_string(*line, "tls.client.server_name"), "api.test");
  EXPECT_GT(json_int(*line, "event.duration").value_or(0), 0);
  EXPECT_EQ(daemon_->audit_text().find("secret-query"), std::string::npos);
}

TEST_F(ProxyIntercept, TheDestinationIsSentThePathTheRulesSaw) {
  // Dot-segments and escapes of unreserved characters are resolved before the decision; the
  // destination gets that same path, so it cannot read another spelling differently. The
  // query is passed as sent.
  const auto r = curl({"--path-as-is", url("api.test", "/a/%7Euser/./b/../c%2dd?x=%2F&y=.")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/a/~user/c-d?x=%2F&y=.");
}

TEST_F(ProxyIntercept, AnInspectedAddressIsInterceptedWithALeafForTheAddress) {
  const std::string port = std::to_string(origin_.port());
  std::string with_address = tables();
  with_address.replace(with_address.find("inspect = ["), 11,
                       "inspect = [\"127.0.0.1:" + port + "\", ");
  ASSERT_TRUE(daemon_->reload(with_address));
  // curl checks the leaf names 127.0.0.1 (an iPAddress SAN) and is issued by sandgate's CA.
  const auto r = curl({"https://127.0.0.1:" + port + "/by-address"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.body, "origin says: GET /by-address\n");
  EXPECT_EQ(origin_.sni_seen(), std::vector<std::string>{""});  // no SNI for an address
  const auto line = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "destination.address"), "127.0.0.1");
  EXPECT_EQ(json_string(*line, "url.scheme"), "https");
}

TEST_F(ProxyIntercept, KeptAliveRequestsShareOneUpstreamConnection) {
  const auto r = curl({url("api.test", "/one"), url("api.test", "/two"), url("api.test", "/3")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(origin_.request_count(), 3u);
  EXPECT_EQ(origin_.requests()[2].target, "/3");
  EXPECT_EQ(origin_.connection_count(), 1u);
  EXPECT_EQ(origin_.sni_seen().size(), 1u);
}

TEST_F(ProxyIntercept, ANewInterceptedConnectionResumesTheUpstreamSession) {
  // With no pool of idle upstream connections, each client connection dials its own.
  std::string cfg = tables();
  cfg.replace(cfg.find("[limits]\n"), 9, "[limits]\nupstream_keepalive_ms = 0\n");
  ASSERT_TRUE(daemon_->reload(cfg));
  for (const std::string path : {"/first", "/second", "/third"}) {
    const auto r = curl({url("api.test", path)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Three client connections, three upstream connections: the later two resume the
  // session the first one got (verified for api.test then), not a full handshake.
  EXPECT_EQ(origin_.sni_seen().size(), 3u);
  EXPECT_EQ(origin_.resumed_handshakes(), 2u);
}

TEST_F(ProxyIntercept, TheNextClientConnectionOfTheSandboxReusesTheIdleUpstreamConnection) {
  for (const std::string path : {"/first", "/second", "/third"}) {
    const auto r = curl({url("api.test", path)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    settle();
  }
  ASSERT_EQ(origin_.request_count(), 3u);
  EXPECT_EQ(origin_.connection_count(), 1u);  // one dial, one handshake for all three
  // Between two client connections the upstream one waits in the pool, and the gauge says so.
  EXPECT_EQ(metric_value(daemon_->metrics_text(), "sandgate_upstream_pool_connections"), 1);
  EXPECT_EQ(origin_.sni_seen().size(), 1u);
  // An HTTP/2 client learns what the origin speaks from ALPN on a connection of its own (an
  // idle one an HTTP/1.1 client left proves nothing), then uses the pool's.
  const auto h2 =
      run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), url("api.test", "/h2")});
  ASSERT_EQ(h2.exit_code, 0) << h2.err;
  EXPECT_EQ(h2.body, "origin says: GET /h2\n");
  settle();
  EXPECT_EQ(origin_.connection_count(), 2u);
  // And after it, HTTP/1.1 again on what the pool holds.
  ASSERT_EQ(curl({url("api.test", "/after")}).exit_code, 0);
  EXPECT_EQ(origin_.connection_count(), 2u);
  // A client that ends its connection with its request does not end the upstream one: the
  // destination is not told "close" (a plain one would be: ProxyHttpForward.Pipelined...).
  ASSERT_EQ(curl({"-H", "Connection: close", url("api.test", "/closing")}).exit_code, 0);
  settle();
  ASSERT_EQ(curl({url("api.test", "/last")}).exit_code, 0);
  EXPECT_EQ(origin_.connection_count(), 2u);
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 7u);
  EXPECT_EQ(requests[5].target, "/closing");
  EXPECT_FALSE(requests[5].has_header("Connection"));
}

TEST_F(ProxyIntercept, AnIdleWorkerClosesTheUpstreamConnectionsWhoseKeepAliveEnded) {
  std::string cfg = tables();
  cfg.replace(cfg.find("[limits]\n"), 9, "[limits]\nupstream_keepalive_ms = 2000\n");
  ASSERT_TRUE(daemon_->reload(cfg));
  ASSERT_EQ(curl({url("api.test", "/kept")}).exit_code, 0);
  settle();
  EXPECT_EQ(metric_value(daemon_->metrics_text(), "sandgate_upstream_pool_connections"), 1);
  // No connection comes back to the pool after it, so only the worker's own sweep can close
  // it (with its descriptor and the config snapshot it was kept under).
  EXPECT_TRUE(eventually(
      [&] {
        return metric_value(daemon_->metrics_text(), "sandgate_upstream_pool_connections") == 0;
      },
      std::chrono::milliseconds(5000)));
}

TEST_F(ProxyIntercept, AnIdleUpstreamConnectionIsNeverReusedAcrossSandboxesOrAReload) {
  std::string cfg = tables();
  cfg += "\n[sandboxes.sb2]\ntoken = \"other-token\"\nports = [" + std::to_string(origin_.port()) +
         "]\nallow = [\"api.test\"]\ninspect = [\"api.test\"]\nallow_cidrs = [\"127.0.0.1/32\"]\n";
  ASSERT_TRUE(daemon_->reload(cfg));
  ASSERT_EQ(curl({url("api.test", "/sb1")}).exit_code, 0);
  settle();
  const auto other = run_curl({"--http1.1", "-x", daemon_->proxy_url("sb2", "other-token"),
                               "--cacert", ca_.cert(), url("api.test", "/sb2")});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  settle();
  EXPECT_EQ(origin_.connection_count(), 2u);  // sb2 dialled its own
  // A reload makes a new snapshot: what was kept under the old one is not reused.
  cfg += "\n";
  ASSERT_TRUE(daemon_->reload(cfg + "# touched\n"));
  ASSERT_EQ(curl({url("api.test", "/after-reload")}).exit_code, 0);
  EXPECT_EQ(origin_.connection_count(), 3u);
}

TEST_F(ProxyIntercept, ARequestBodyIsStreamedToTheOrigin) {
  const std::string body = pattern_bytes(300 * 1024, 7);
  TempDir d;
  const std::string file = d.write("body.bin", body);
  const auto r = curl({"-H", "Transfer-Encoding: chunked", "--data-binary", "@" + file,
                       url("api.test", "/upload")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 200);
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_TRUE(requests[0].body == body) << "body of " << requests[0].body.size() << " bytes";
}

TEST_F(ProxyIntercept, AHostThatIsNotInspectedIsStillSplicedEndToEnd) {
  const auto r = run_curl(
      {"--http1.1", "-x", proxy(), "--cacert", origin_ca_, url("spliced.test", "/spliced")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.body, "origin says: GET /spliced\n");
  EXPECT_EQ(origin_.sni_seen(), std::vector<std::string>{"spliced.test"});
  const auto line = daemon_->wait_audit_code("connection_closed");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "network.protocol"), "connect");
}

TEST_F(ProxyIntercept, AClientThatDoesNotTrustTheCaFailsAndNothingReachesTheOrigin) {
  const auto r =
      run_curl({"--http1.1", "-x", proxy(), "--cacert", origin_ca_, url("api.test", "/never")});
  EXPECT_EQ(r.exit_code, 60) << r.err;  // CURLE_PEER_FAILED_VERIFICATION
  const auto line = daemon_->wait_audit_code("CLIENT_TLS_FAILED");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "network.protocol"), "tls");
  EXPECT_EQ(json_string(*line, "destination.address"), "api.test");
  EXPECT_EQ(origin_.connection_count(), 0u);
}

TEST_F(ProxyIntercept, ARequestForAnotherAuthorityIsMisdirectedAndNeverForwarded) {
  // Domain fronting inside the intercepted TLS: SNI and leaf are api.test, Host is another
  // host this sandbox may reach.
  const std::string other = "other.test:" + std::to_string(origin_.port());
  const auto r = curl({"-H", "Host: " + other, url("api.test", "/fronted")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 421);
  EXPECT_NE(r.headers.find("X-Sandgate-Error: MISDIRECTED_REQUEST"), std::string::npos)
      << r.headers;
  EXPECT_NE(r.body.find("\"code\":\"MISDIRECTED_REQUEST\""), std::string::npos) << r.body;
  EXPECT_EQ(origin_.request_count(), 0u);
  const auto line = daemon_->wait_audit_code("MISDIRECTED_REQUEST");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "destination.address"), "other.test");
}

TEST_F(ProxyIntercept, AnotherPortInTheHostFieldIsMisdirectedToo) {
  const auto r = curl({"-H", "Host: api.test:1", url("api.test", "/port")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 421);
  EXPECT_EQ(origin_.request_count(), 0u);
}

TEST_F(ProxyIntercept, AnUpstreamWithAnUntrustedCertificateGets502AndNoRequestByte) {
  const auto r = curl({"https://impostor.test:" + std::to_string(impostor_.port()) + "/x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 502);
  EXPECT_NE(r.body.find("\"code\":\"UPSTREAM_TLS_FAILED\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("certificate"), std::string::npos) << r.body;
  EXPECT_TRUE(eventually([&] { return impostor_.failed_handshakes() == 1u; }));
  EXPECT_EQ(impostor_.request_count(), 0u);
  const auto line = daemon_->wait_audit_code("UPSTREAM_TLS_FAILED");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "destination.address"), "impostor.test");
}

TEST_F(ProxyIntercept, AnUpstreamCertificateForAnotherNameGets502) {
  // The origin's certificate is trusted, but it does not name wrongname.test.
  const auto r = curl({url("wrongname.test", "/x")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 502);
  EXPECT_NE(r.body.find("\"code\":\"UPSTREAM_TLS_FAILED\""), std::string::npos) << r.body;
  // The origin counts the handshake sandgate broke off once it sees the close.
  EXPECT_TRUE(eventually([&] { return origin_.failed_handshakes() == 1u; }));
  EXPECT_EQ(origin_.request_count(), 0u);
}

TEST_F(ProxyIntercept, FrontingIntoAnInspectedHostThroughASplicedTunnelIsRefused) {
  // CONNECT to an address that is spliced, with the SNI of an inspected host: the rules of
  // that host would be skipped, so the tunnel's gate refuses it before a byte goes upstream.
  const std::string port = std::to_string(origin_.port());
  const auto r = run_curl({"--http1.1", "-x", proxy(), "--cacert", origin_ca_, "--connect-to",
                           "api.test:" + port + ":127.0.0.1:" + port, url("api.test", "/x")});
  EXPECT_EQ(r.exit_code, 35) << r.err;  // the TLS alert
  // The tunnel dialled the address, but no handshake and no request reached it.
  EXPECT_TRUE(origin_.sni_seen().empty());
  EXPECT_EQ(origin_.request_count(), 0u);
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "sni_mismatch");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "tls.client.server_name"), "api.test");
}

TEST_F(ProxyIntercept, TheLeafIsMintedOncePerNameAndNamesTheHost) {
  for (int i = 0; i < 3; ++i) {
    const auto r = curl({url("api.test", "/" + std::to_string(i))});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string metrics = daemon_->metrics_text();
  EXPECT_EQ(metric_value(metrics, "sandgate_interception_leaf_mints_total"), 1);
  EXPECT_EQ(metric_value(metrics, "sandgate_interception_leaf_cache_hits_total"), 2);
}

TEST_F(ProxyIntercept, ASandboxCyclingThroughNamesIsHeldToItsMintingBudget) {
  // THREATS 24: every name a wildcard allows would make sandgate mint (and evict) a leaf.
  std::string cfg = tables();
  cfg.replace(cfg.find("upstream_ca_file"), 0, "max_leaf_mints_per_minute = 3\n");
  cfg.replace(cfg.find("inspect = ["), 11, "inspect = [\"*.mint.test\", ");
  cfg.replace(cfg.find("allow = ["), 9, "allow = [\"*.mint.test\", ");
  cfg.replace(cfg.find("[dns.hosts]\n"), 12, "[dns.hosts]\n\"a.mint.test\" = [\"127.0.0.1\"]\n");
  daemon_.reset();
  daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{cfg});
  // Names need not resolve for the leaf: the CONNECT is answered before any dial.
  const auto connect = [&](const std::string& host) {
    return curl({"--connect-timeout", "3", url(host, "/")}).connect_code;
  };
  EXPECT_EQ(connect("a.mint.test"), 200);
  EXPECT_EQ(connect("b.mint.test"), 200);
  EXPECT_EQ(connect("c.mint.test"), 200);
  EXPECT_EQ(connect("d.mint.test"), 429);  // a fourth new name within the minute
  EXPECT_EQ(connect("a.mint.test"), 200);  // a cached leaf costs nothing
  const auto line = daemon_->wait_audit_code("TOO_MANY_LEAF_MINTS");
  ASSERT_TRUE(AuditLineIs(line, "TOO_MANY_LEAF_MINTS", "-", kId));
  EXPECT_EQ(json_string(*line, "destination.domain"), "d.mint.test");
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 429);
  const std::string metrics = daemon_->metrics_text();
  EXPECT_EQ(metric_value(metrics, "sandgate_interception_leaf_mints_total"), 3);
  EXPECT_EQ(metric_value(metrics, "sandgate_errors_total",
                         {{"code", "TOO_MANY_LEAF_MINTS"}, {"side", "client"}}),
            1);
}

}  // namespace
}  // namespace sandgate::test

namespace sandgate::test {
namespace {

// Python through the proxy into an intercepted TLS stream: sends `request` raw, then, after
// the response head, `after`; prints everything it received.
CommandResult python_through(const SandgateProcess& daemon, const std::string& ca,
                             const std::string& authority, const std::string& request,
                             const std::string& after) {
  const std::string script = R"(
import base64, socket, ssl, sys
port, auth, ca, host, request, after = sys.argv[1:7]
s = socket.create_connection(("127.0.0.1", int(port)))
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n"
           % (host, host, base64.b64encode(auth.encode()).decode())).encode())
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=ca)
t = ctx.wrap_socket(s, server_hostname=host.rsplit(":", 1)[0])
t.sendall(request.encode().decode("unicode_escape").encode("latin-1"))
got = b""
t.settimeout(3)
try:
    while b"\r\n\r\n" not in got:
        got += t.recv(65536)
    if after:
        t.sendall(after.encode())
    while True:
        b = t.recv(65536)
        if not b:
            break
        got += b
except (socket.timeout, ssl.SSLError, ConnectionError):
    pass
sys.stdout.write(got.decode("latin-1"))
)";
  return run_command({"python3", "-c", script, std::to_string(daemon.explicit_port()),
                      kId + ":" + kToken, ca, authority, request, after});
}

TEST_F(ProxyIntercept, AWebSocketUpgradeIsDecidedThenRelayedBothWays) {
  origin_.set_handler([](const RecordedRequest& r) {
    if (r.header("Upgrade") != "websocket") return OriginReply::with_length(400, "no upgrade\n");
    return OriginReply::raw(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\nframe-from-origin",
        false);
  });
  const std::string authority = "api.test:" + std::to_string(origin_.port());
  const auto r = python_through(
      *daemon_, ca_.cert(), authority,
      "GET /socket HTTP/1.1\\r\\nHost: " + authority +
          "\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Version: 13\\r\\n"
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n\\r\\n",
      "frame-from-client");
  EXPECT_NE(r.out.find("HTTP/1.1 101"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("frame-from-origin"), std::string::npos) << r.out;
  EXPECT_TRUE(eventually([&] {
    return origin_.raw_received().find("frame-from-client") != std::string::npos;
  })) << origin_.raw_received();
  const auto line = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 101);
  EXPECT_EQ(json_string(*line, "url.path"), "/socket");
}

TEST_F(ProxyIntercept, AnH2cUpgradeNeverReachesTheOrigin) {
  // Upgrade: h2c would switch the stream to a protocol whose requests no filter decides
  // (THREATS: h2c smuggling): the upgrade is removed and the request answered as HTTP/1.1.
  const std::string authority = "api.test:" + std::to_string(origin_.port());
  const auto r = python_through(*daemon_, ca_.cert(), authority,
                                "GET /h2c HTTP/1.1\\r\\nHost: " + authority +
                                    "\\r\\nUpgrade: h2c\\r\\nHTTP2-Settings: AAMAAABkAAQAAP__\\r\\n"
                                    "Connection: Upgrade, HTTP2-Settings\\r\\n\\r\\n",
                                "");
  EXPECT_NE(r.out.find("HTTP/1.1 200"), std::string::npos) << r.out << r.err;
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_FALSE(requests[0].has_header("Upgrade"));
  EXPECT_FALSE(requests[0].has_header("HTTP2-Settings"));
  EXPECT_EQ(requests[0].header("Connection").find("pgrade"), std::string::npos);
}

}  // namespace
}  // namespace sandgate::test

namespace sandgate::test {
namespace {

TEST_F(ProxyIntercept, Http2ClientsAreServedOverHttp2AndBridgedToAnHttp11Origin) {
  const auto r =
      run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "-w", "%{http_version}", "-o",
                "/dev/null", url("api.test", "/h2/one"), url("api.test", "/h2/two")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(origin_.request_count(), 2u);
  EXPECT_EQ(origin_.requests()[1].target, "/h2/two");
  EXPECT_EQ(origin_.requests()[1].header("Host"), "api.test:" + std::to_string(origin_.port()));
  EXPECT_EQ(origin_.connection_count(), 1u);  // the HTTP/1.1 connection is kept for the second
  const auto line = daemon_->wait_audit([](const boost::json::object& l) {
    return json_string(l, "event.code") == "http_request" &&
           json_string(l, "url.path") == "/h2/two";
  });
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "http.version"), "2");
  EXPECT_EQ(json_string(*line, "url.scheme"), "https");
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 200);
}

TEST_F(ProxyIntercept, Http2UploadIsStreamedToAnHttp11Origin) {
  const std::string body = pattern_bytes(200 * 1024, 3);
  TempDir d;
  const std::string file = d.write("body.bin", body);
  const auto r = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "--data-binary",
                           "@" + file, url("api.test", "/h2/upload")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_TRUE(requests[0].body == body) << requests[0].body.size();
}

// An HTTP/2 client is told what an HTTP/1.1 origin did as an HTTP/1.1 client would be: one
// that closed without answering is UPSTREAM_CONNECT_FAILED, retryable only for an idempotent
// method (it may have acted on a POST), and one that never answers is UPSTREAM_TIMEOUT on that
// stream once `idle_timeout_ms` (3 s here) has passed, while the connection serves on.
TEST_F(ProxyIntercept, Http2ClientsAreToldWhyTheHttp11OriginGaveNoResponse) {
  origin_.set_handler([](const RecordedRequest& r) {
    if (r.target == "/closed") return OriginReply::close_now();
    if (r.target == "/silent") return OriginReply::silence();
    return OriginReply::with_length(200, "ok");
  });
  ExpectHttp2Failure({url("api.test", "/closed")}, 502, "UPSTREAM_CONNECT_FAILED", true, "/closed",
                     "upstream_close");
  ExpectHttp2Failure({"-d", "hi", url("api.test", "/closed")}, 502, "UPSTREAM_CONNECT_FAILED",
                     false, "/closed", "upstream_close");
  ExpectSilentStreamEndsAlone(url("api.test", "/silent"), url("api.test", "/after"));
  EXPECT_EQ(origin_.request_count(), 4u);
}

TEST_F(ProxyIntercept, Http2CoalescingOntoTheInterceptedConnectionIs421) {
  // HTTP/2 connection coalescing: a second :authority on the same connection.
  const auto r = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "-H",
                           "Host: other.test:" + std::to_string(origin_.port()),
                           url("api.test", "/coalesced")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 421);
  EXPECT_NE(r.body.find("MISDIRECTED_REQUEST"), std::string::npos) << r.body;
  EXPECT_EQ(origin_.request_count(), 0u);
}

// An HTTP/2 origin (nghttpd) that answers every GET with trailers, as gRPC servers do, and a
// python3-h2 client through the proxy: h2 on both legs, trailers kept end to end.
TEST_F(ProxyIntercept, Http2ToAnHttp2OriginKeepsTrailers) {
  const std::string key = roots_dir_.write("origin.key", origin_cert_.key_pem);
  std::filesystem::create_directories(roots_dir_.file("www"));
  roots_dir_.write("www/data.txt", "payload from an h2 origin\n");
  const std::uint16_t port = h2::test::free_port();
  h2::test::BackgroundPeer nghttpd({"nghttpd", "-d", roots_dir_.file("www"),
                                    "--trailer=grpc-status: 0", std::to_string(port), key,
                                    origin_ca_});
  ASSERT_TRUE(h2::test::wait_listening(port));
  std::string with_port = tables();
  with_port.replace(with_port.find("ports = ["), 9, "ports = [" + std::to_string(port) + ", ");
  ASSERT_TRUE(daemon_->reload(with_port));
  const std::string script = R"(
import base64, socket, ssl, sys
import h2.connection, h2.events
proxy, auth, ca, authority = sys.argv[1:5]
s = socket.create_connection(("127.0.0.1", int(proxy)))
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n"
           % (authority, authority, base64.b64encode(auth.encode()).decode())).encode())
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
t = ctx.wrap_socket(s, server_hostname=authority.rsplit(":", 1)[0])
print("alpn", t.selected_alpn_protocol())
c = h2.connection.H2Connection()
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", authority),
                   (":path", "/data.txt"), ("te", "trailers")], end_stream=True)
t.sendall(c.data_to_send())
body, done = b"", False
while not done:
    data = t.recv(65536)
    if not data:
        break
    for e in c.receive_data(data):
        if isinstance(e, h2.events.ResponseReceived):
            print("status", dict(e.headers)[b":status"].decode())
        elif isinstance(e, h2.events.DataReceived):
            body += e.data
            c.acknowledge_received_data(len(e.data), e.stream_id)
        elif isinstance(e, h2.events.TrailersReceived):
            for k, v in e.headers:
                print("trailer", k.decode(), v.decode())
        elif isinstance(e, h2.events.StreamEnded):
            done = True
    t.sendall(c.data_to_send())
print("body", body.decode().strip())
)";
  const auto r =
      run_command({"/usr/bin/python3", "-c", script, std::to_string(daemon_->explicit_port()),
                   kId + ":" + kToken, ca_.cert(), "api.test:" + std::to_string(port)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("alpn h2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status 200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trailer grpc-status 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("body payload from an h2 origin"), std::string::npos) << r.out;
}

// An HTTP/2 origin (python3-h2) that never answers /silent and resets /reset and /refused:
// each stream gets what an HTTP/1.1 client of such an origin gets (504, 502), the client's
// connection and its other streams go on, and a refused stream is refused to the client too.
TEST_F(ProxyIntercept, Http2ClientsOfAnHttp2OriginAreToldWhyItGaveNoResponse) {
  const std::string key = roots_dir_.write("origin.key", origin_cert_.key_pem);
  const std::string script = R"(
import socket, ssl, sys, threading
import h2.config, h2.connection, h2.errors, h2.events
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_alpn_protocols(["h2"])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
print("port=%d" % srv.getsockname()[1], flush=True)
def serve(raw):
    try:
        t = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        return
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    t.sendall(c.data_to_send())
    while True:
        try:
            data = t.recv(65536)
        except (OSError, ssl.SSLError):
            return
        if not data:
            return
        for e in c.receive_data(data):
            if isinstance(e, h2.events.RequestReceived):
                path, sid = dict(e.headers)[":path"], e.stream_id
                if path == "/reset":
                    c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                elif path == "/refused":
                    c.reset_stream(sid, h2.errors.ErrorCodes.REFUSED_STREAM)
                elif path != "/silent":
                    c.send_headers(sid, [(":status", "200"), ("content-length", str(len(path)))])
                    c.send_data(sid, path.encode(), end_stream=True)
            elif isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        t.sendall(c.data_to_send())
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
)";
  h2::test::BackgroundPeer h2_origin({"/usr/bin/python3", "-c", script, origin_ca_, key});
  const std::string port = h2_origin.ready_line("port=");
  ASSERT_FALSE(port.empty()) << "the python3-h2 origin did not start";
  std::string with_port = tables();
  with_port.replace(with_port.find("ports = ["), 9, "ports = [" + port + ", ");
  ASSERT_TRUE(daemon_->reload(with_port));
  const std::string authority = "api.test:" + port;
  const auto at = [&](const std::string& path) { return "https://" + authority + path; };

  ExpectHttp2Failure({at("/reset")}, 502, "UPSTREAM_CONNECT_FAILED", true, "/reset",
                     "upstream_reset");
  ExpectHttp2Failure({"-d", "hi", at("/reset")}, 502, "UPSTREAM_CONNECT_FAILED", false, "/reset",
                     "upstream_reset");
  // A large upload refused while it is still going: the client is shown the 502 all the same
  // (the rest of its body is read and dropped first, its stream not reset).
  const std::string upload = roots_dir_.write("upload", std::string(4 << 20, 'u'));
  ExpectHttp2Failure({"--data-binary", "@" + upload, at("/reset")}, 502, "UPSTREAM_CONNECT_FAILED",
                     false, "/reset", "upstream_reset");

  ExpectSilentStreamEndsAlone(at("/silent"), at("/after"));

  // Refused: the client's stream is refused too, and its client retries it as it would have
  // the destination's refusal (curl: on new connections, a few times, then gives up).
  const std::size_t lines_before = daemon_->audit_lines().size();
  const auto refused = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), at("/refused")});
  EXPECT_NE(refused.exit_code, 0) << refused.body;
  ASSERT_TRUE(daemon_->wait_audit(
      [&](const boost::json::object& l) { return json_string(l, "url.path") == "/refused"; },
      std::chrono::milliseconds(3000), lines_before));
  const auto lines = daemon_->audit_lines();
  std::size_t refusals = 0;
  for (std::size_t i = lines_before; i < lines.size(); ++i) {
    if (json_string(lines[i], "url.path") != "/refused") continue;
    ++refusals;
    EXPECT_EQ(json_string(lines[i], "event.code"), "UPSTREAM_CONNECT_FAILED");
    EXPECT_EQ(json_string(lines[i], "labels.termination"), "upstream_reset");
  }
  EXPECT_GE(refusals, 2u) << refused.err;  // the first, and at least one retry
}

}  // namespace
}  // namespace sandgate::test

namespace sandgate::test {
namespace {

// THREATS 31: an HTTP/2 client's streams to an HTTP/1.1-only origin share at most 6 upstream
// connections (the rest wait their turn, and are all served), and beyond the first they count
// as the sandbox's connections: at max_connections_per_sandbox = 3 the client connection may
// hold 3. Before, each stream in flight had its own upstream connection, uncounted.
TEST_F(ProxyIntercept, Http2StreamsToAnHttp11OriginShareABoundedSetOfConnections) {
  origin_.set_handler([](const RecordedRequest&) {
    OriginReply slow = OriginReply::with_length(200, "slow");
    slow.parts.front().delay = std::chrono::milliseconds(300);
    return slow;
  });
  // python3-h2 through the proxy: 20 GETs in flight at once on one intercepted connection.
  const auto run = [&] {
    const std::string port = std::to_string(origin_.port());
    return h2::test::run_peer(
        h2::test::h2_client({"--via", std::to_string(daemon_->explicit_port()), kId + ":" + kToken,
                             ca_.cert(), "api.test:" + port, "parallel", port, "20", "/slow"}),
        std::chrono::seconds(60));
  };
  std::string twenty_ok = "200";
  for (int i = 1; i < 20; ++i) twenty_ok += " 200";
  auto r = run();
  EXPECT_EQ(r["statuses"], twenty_ok) << r["exit"];
  EXPECT_EQ(origin_.request_count(), 20u);
  EXPECT_LE(origin_.connection_count(), 6u);
  EXPECT_GE(origin_.connection_count(), 2u);  // control: the streams did run side by side

  std::string capped = tables();
  capped.replace(capped.find("[limits]\n"), 9, "[limits]\nmax_connections_per_sandbox = 3\n");
  ASSERT_TRUE(daemon_->reload(capped));
  settle();
  const std::size_t before = origin_.connection_count();
  r = run();
  EXPECT_EQ(r["statuses"], twenty_ok) << r["exit"];
  EXPECT_LE(origin_.connection_count() - before, 3u);
}

// THREATS 31 as the attack was made: one sandbox, 4 client connections x 100 streams to an
// HTTP/1.1-only origin, each a POST whose body never comes, against a daemon with 256
// descriptors (prlimit on the daemon only; each upload sends 10 bytes and stalls). Before, that
// held 374 upstream connections, the daemon ran out of descriptors and a neighbour's CONNECT timed
// out. Now the streams share at most 6 upstream connections per client connection, and the
// neighbour's tunnel, opened while they hang, is served.
TEST_F(ProxyIntercept, StalledHttp2UploadsCannotTakeTheDaemonsDescriptors) {
  const std::string kToken2 = "tok-sb2-intercept-Lw7";
  SandgateOptions options{tables() + "\n[sandboxes.sb2]\ntoken = \"" + kToken2 + "\"\nports = [" +
                          std::to_string(origin_.port()) +
                          "]\nallow = [\"spliced.test\"]\nallow_cidrs = [\"127.0.0.1/32\"]\n"};
  options.wrapper = {"prlimit", "--nofile=256:256", "--"};
  daemon_ = std::make_unique<SandgateProcess>(options);
  const std::string port = std::to_string(origin_.port());
  std::vector<std::future<std::map<std::string, std::string>>> floods;
  for (int i = 0; i < 4; ++i) {
    floods.push_back(std::async(std::launch::async, [&] {
      return h2::test::run_peer(
          h2::test::h2_client({"--via", std::to_string(daemon_->explicit_port()),
                               kId + ":" + kToken, ca_.cert(), "api.test:" + port, "streams", port,
                               "100", "10"}),
          std::chrono::seconds(60));
    }));
  }
  // The uploads hang at the origin (it waits for their bodies) for the 5 s the peers hold.
  ASSERT_TRUE(eventually([&] { return origin_.connection_count() >= 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const CurlResult neighbour = run_curl({"-x", daemon_->proxy_url("sb2", kToken2), "--cacert",
                                         origin_ca_, url("spliced.test", "/neighbour")});
  EXPECT_EQ(neighbour.exit_code, 0) << neighbour.err;
  EXPECT_EQ(neighbour.http_code, 200);
  EXPECT_LE(origin_.connection_count(), 4u * 6u + 1u);
  EXPECT_GE(origin_.connection_count(), 13u) << "control: the streams ran side by side";
  for (auto& flood : floods) {
    const auto r = flood.get();
    EXPECT_EQ(r.at("goaway"), "none") << r.at("exit");
  }
}

// An origin that speaks both: an idle HTTP/1.1 connection an HTTP/1.1 client left in the pool
// does not make the next HTTP/2 client's requests go over HTTP/1.1 (ALPN decides). Control:
// the HTTP/1.1 client is served over HTTP/1.1.
TEST_F(ProxyIntercept, AnHttp2ClientGetsHttp2FromAnOriginThatSpeaksItWhateverThePoolHolds) {
  const std::string key = roots_dir_.write("origin.key", origin_cert_.key_pem);
  const std::string script = R"(
import socket, ssl, sys, threading
import h2.config, h2.connection, h2.events
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_alpn_protocols(["h2", "http/1.1"])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
print("port=%d" % srv.getsockname()[1], flush=True)
def serve_h1(t):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            data = t.recv(65536)
            if not data:
                return
            buf += data
        _, buf = buf.split(b"\r\n\r\n", 1)
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nh1\n")
def serve_h2(t):
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    t.sendall(c.data_to_send())
    while True:
        data = t.recv(65536)
        if not data:
            return
        for e in c.receive_data(data):
            if isinstance(e, h2.events.RequestReceived):
                body = b"h2\n"
                if dict(e.headers)[":path"] == "/names":
                    body = ",".join(sorted(n for n, _ in e.headers)).encode()
                c.send_headers(e.stream_id, [(":status", "200"),
                                             ("content-length", str(len(body)))])
                c.send_data(e.stream_id, body, end_stream=True)
        t.sendall(c.data_to_send())
def serve(raw):
    try:
        t = ctx.wrap_socket(raw, server_side=True)
        (serve_h2 if t.selected_alpn_protocol() == "h2" else serve_h1)(t)
    except (OSError, ssl.SSLError):
        return
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
)";
  h2::test::BackgroundPeer both({"/usr/bin/python3", "-c", script, origin_ca_, key});
  const std::string port = both.ready_line("port=");
  ASSERT_FALSE(port.empty()) << "the python3-h2 origin did not start";
  std::string with_port = tables();
  with_port.replace(with_port.find("ports = ["), 9, "ports = [" + port + ", ");
  ASSERT_TRUE(daemon_->reload(with_port));
  const std::string at = "https://api.test:" + port + "/which";
  const auto h1 = curl({at});
  ASSERT_EQ(h1.exit_code, 0) << h1.err;
  EXPECT_EQ(h1.body, "h1\n");
  settle();  // its upstream connection is idle in the pool now
  const auto h2c = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), at});
  ASSERT_EQ(h2c.exit_code, 0) << h2c.err;
  EXPECT_EQ(h2c.body, "h2\n");

  // THREATS 36, h2 to h2: the sandbox's own Proxy-Authorization never reaches the origin;
  // control: its other fields do.
  const auto names = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "-H",
                               "Proxy-Authorization: Basic c2I6dG9r", "-H", "X-Control: 1",
                               "https://api.test:" + port + "/names"});
  ASSERT_EQ(names.exit_code, 0) << names.err;
  EXPECT_EQ(names.body.find("proxy-authorization"), std::string::npos) << names.body;
  EXPECT_NE(names.body.find("x-control"), std::string::npos) << names.body;
}

// An HTTP/1.1 origin that repeats its Content-Length (the same value, as some CGI gateways
// do): the HTTP/2 client gets it once and reads the response (it refuses two as malformed).
// Control: the HTTP/1.1 client reads it too.
TEST_F(ProxyIntercept, ARepeatedContentLengthReachesAnHttp2ClientOnce) {
  origin_.set_handler([](const RecordedRequest&) {
    return OriginReply::raw("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nok\n",
                            false);
  });
  for (const std::string version : {"--http2", "--http1.1"}) {
    const auto r =
        run_curl({version, "-x", proxy(), "--cacert", ca_.cert(), url("api.test", "/twice")});
    ASSERT_EQ(r.exit_code, 0) << version << r.err;
    EXPECT_EQ(r.body, "ok\n") << version;
  }
}

// THREATS 36, h2 to HTTP/1.1: the same request bridged to an HTTP/1.1 origin loses its
// proxy-only fields as an HTTP/1.1 client's would. Control: X-Control arrives.
TEST_F(ProxyIntercept, AnHttp2ClientsProxyOnlyFieldsNeverReachAnHttp11Origin) {
  const auto r = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "-H",
                           "Proxy-Authorization: Basic c2I6dG9r", "-H", "X-Control: 1", "-H",
                           "HTTP2-Settings: AAMAAABkAAQAAP__", url("api.test", "/fields")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(origin_.request_count(), 1u);
  const auto request = origin_.requests()[0];
  EXPECT_EQ(request.header("Proxy-Authorization"), "");
  EXPECT_EQ(request.header("HTTP2-Settings"), "");
  EXPECT_EQ(request.header("X-Control"), "1");
}

// An HTTP/2 request whose :path an HTTP/1.1 client could not send (nghttp2 lets '#', '\\', '"'
// and non-ASCII bytes through; h2_h1_head_fuzz found the bridge writing them into the HTTP/1.1
// request line) is refused as it would be over HTTP/1.1: 400 MALFORMED_REQUEST, nothing sent
// to the origin. Control: the same characters percent-encoded reach it.
TEST_F(ProxyIntercept, AnHttp2PathAnHttp11ClientCouldNotSendNeverReachesTheOrigin) {
  for (const std::string target : {"/a#b", "/a\\b", "/\"q\"", "/caf\xc3\xa9"}) {
    const auto r = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "--request-target",
                             target, url("api.test", "/ignored")});
    ASSERT_EQ(r.exit_code, 0) << target << r.err;
    EXPECT_EQ(r.http_code, 400) << target;
    EXPECT_NE(r.body.find("MALFORMED_REQUEST"), std::string::npos) << target << r.body;
  }
  EXPECT_EQ(origin_.request_count(), 0u);
  const auto r = run_curl({"--http2", "-x", proxy(), "--cacert", ca_.cert(), "--request-target",
                           "/a%23b%22", url("api.test", "/ignored")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 200);
  ASSERT_EQ(origin_.request_count(), 1u);
  EXPECT_EQ(origin_.requests()[0].target, "/a%23b%22");
}

}  // namespace
}  // namespace sandgate::test
