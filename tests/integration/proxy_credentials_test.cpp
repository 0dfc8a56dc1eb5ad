// Credentials attached outside the sandbox, through the real daemon: a github_app credential
// minted by a GitHub-like token endpoint on loopback (tests/support/fake_token_server), a
// static one from a file, inject rules on an inspected host, real curl over HTTP/1.1 and
// HTTP/2 through CONNECT. What the origin receives, what the sandbox gets back (never the
// token: an origin that echoes the request's Authorization is redacted), the placeholder
// tripwire, the 503 when no token can be had, the audit lines and metrics; token endpoints
// resolved through the daemon's resolver, one that never answers stalling no other credential.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <future>
#include <string>

#include "secrets/encoding.hpp"
#include "secrets/placeholder.hpp"
#include "support/eventually.hpp"
#include "support/fake_dns_server.hpp"
#include "support/fake_token_server.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-credentials-7Yq";
// What the fake GitHub mints, and what the static credential holds.
const std::string kGitHubToken = "ghs_FAKEinstallationTOKEN0123456789abcdef";
const std::string kStaticToken = "npm_STATICtoken9876543210zyxwvu";
const std::string kPlaceholderKey(32, '\x5a');

class ProxyCredentials : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ca = run_command({sandgate_binary(), "ca", "init", dir_.file("ca")});
    ASSERT_EQ(ca.exit_code, 0) << ca.err;
    ASSERT_EQ(run_command({"openssl", "genrsa", "-out", dir_.file("app.pem"), "2048"}).exit_code,
              0);
    ::chmod(dir_.file("app.pem").c_str(), 0600);
    dir_.write("static-token", kStaticToken + "\n");
    ::chmod(dir_.file("static-token").c_str(), 0600);
    dir_.write("placeholder.key", kPlaceholderKey);
    ::chmod(dir_.file("placeholder.key").c_str(), 0600);
    // Echoes the Authorization it received, in a header and in the body.
    origin_.set_handler([](const RecordedRequest& r) {
      const std::string auth = r.header("Authorization");
      return OriginReply::with_length(200, "you sent: " + auth + "\n", {{"X-Echo", auth}});
    });
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  std::string tables() const {
    const std::string p = std::to_string(origin_.port());
    return R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 3000
connect_timeout_ms = 2000

[dns.hosts]
"api.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"npm.test" = ["127.0.0.1"]

[interception]
ca_cert = ")" +
           dir_.file("ca/ca.pem") +
           R"("
ca_key = ")" +
           dir_.file("ca/ca.key") +
           R"("
upstream_ca_file = ")" +
           roots_ +
           R"("

[credentials]
placeholder_key_file = ")" +
           dir_.file("placeholder.key") +
           R"("

[credentials.gh]
provider = "github_app"
app_id = 4242
private_key_file = ")" +
           dir_.file("app.pem") +
           R"("
installation_id = 99
api_url = ")" +
           github_.url() +
           R"("
ca_file = ")" +
           github_.ca_file() +
           R"("
env = ["GH_TOKEN"]

[credentials.st]
provider = "static"
file = ")" +
           dir_.file("static-token") +
           R"("

[sandboxes.sb1]
token = ")" +
           kToken +
           R"("
ports = [)" +
           p +
           R"(]
allow = ["api.test", "other.test", "npm.test"]
inspect = ["other.test"]
allow_cidrs = ["127.0.0.1/32"]

[[sandboxes.sb1.inject]]
hosts = ["api.test"]
credential = "gh"
as = "bearer"
repositories = ["acme/widgets"]

[[sandboxes.sb1.inject]]
hosts = ["npm.test"]
credential = "st"
as = "basic"
user = "x-access-token"
)";
  }

  std::string url(const std::string& host, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(origin_.port()) + path;
  }
  CurlResult curl(std::vector<std::string> args, const std::string& version = "--http1.1") const {
    std::vector<std::string> all = {version, "-x", daemon_->proxy_url(kId, kToken), "--cacert",
                                    dir_.file("ca/ca.pem")};
    all.insert(all.end(), args.begin(), args.end());
    return run_curl(all);
  }
  std::string placeholder(const std::string& sandbox, const std::string& credential) const {
    return secrets::PlaceholderKey::from_bytes(kPlaceholderKey)
        .placeholder_for(sandbox, credential);
  }

  TempDir dir_;
  FakeTokenServer github_{[](const TokenRequest&) {
    TokenResponse r;
    r.status = 201;
    r.body = R"({"token":")" + kGitHubToken + R"(","expires_at":"2099-01-01T00:00:00Z"})";
    return r;
  }};
  const TestCertificate origin_cert_ =
      make_self_signed_certificate({"api.test", "other.test", "npm.test"}, {"127.0.0.1"});
  TempDir roots_dir_;
  const std::string roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyCredentials, TheCredentialIsAttachedAndTheSandboxNeverSeesIt) {
  const auto r = curl({"-H", "Authorization: Bearer the-sandboxs-own", url("api.test", "/repos")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_code, 200);
  // The origin got sandgate's header only, and was asked for an uncompressed response.
  const auto requests = origin_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].header_count("Authorization"), 1u);
  EXPECT_EQ(requests[0].header("Authorization"), "Bearer " + kGitHubToken);
  EXPECT_EQ(requests[0].header("Accept-Encoding"), "identity");
  // The token was minted for this sandbox's repository only.
  const auto minted = github_.requests();
  ASSERT_EQ(minted.size(), 1u);
  EXPECT_EQ(minted[0].target, "/app/installations/99/access_tokens");
  EXPECT_NE(minted[0].body.find(R"("repositories":["widgets"])"), std::string::npos)
      << minted[0].body;
  // What came back echoed it, in a header and in the body: both redacted, lengths kept.
  const std::string stars(kGitHubToken.size(), '*');
  EXPECT_EQ(r.body, "you sent: Bearer " + stars + "\n");
  EXPECT_NE(r.headers.find("X-Echo: Bearer " + stars), std::string::npos) << r.headers;
  EXPECT_EQ((r.headers + r.body).find(kGitHubToken), std::string::npos);

  const auto line = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "credential.name"), "gh");
  EXPECT_EQ(json_string(*line, "credential.fingerprint").value_or("").size(), 12u);
  EXPECT_EQ(json_int(*line, "labels.redactions"), 2);
  EXPECT_EQ(daemon_->audit_text().find(kGitHubToken), std::string::npos);
  EXPECT_EQ(daemon_->stderr_text().find(kGitHubToken), std::string::npos);

  const std::string metrics = daemon_->metrics_text();
  EXPECT_EQ(metric_value(metrics, "sandgate_credential_refreshes_total",
                         {{"credential", "gh"}, {"provider", "github_app"}}),
            1);
  EXPECT_GT(metric_value(metrics, "sandgate_credential_expiry_seconds", {{"credential", "gh"}})
                .value_or(0),
            1e6);
  // One scope asked for: one entry in the credential's token cache.
  EXPECT_EQ(
      metric_value(metrics, "sandgate_credential_token_cache_entries", {{"credential", "gh"}}), 1);
  EXPECT_EQ(metrics.find(kGitHubToken), std::string::npos);
}

TEST_F(ProxyCredentials, OverHttp2TheTokenIsAttachedAndRedactedToo) {
  for (int i = 0; i < 2; ++i) {
    const auto r = curl({url("api.test", "/h2")}, "--http2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.body, "you sent: Bearer " + std::string(kGitHubToken.size(), '*') + "\n");
  }
  ASSERT_EQ(origin_.request_count(), 2u);
  EXPECT_EQ(origin_.requests()[1].header("Authorization"), "Bearer " + kGitHubToken);
  EXPECT_EQ(github_.request_count(), 1u);  // the second request used the cached token
}

TEST_F(ProxyCredentials, BasicWithAFixedUserFromAStaticFile) {
  const auto r = curl({url("npm.test", "/pkg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string basic = origin_.requests().at(0).header("Authorization");
  // base64("x-access-token:" + kStaticToken)
  const auto decoded = run_command({"sh", "-c", "printf %s '" + basic.substr(6) + "' | base64 -d"});
  EXPECT_EQ(decoded.out, "x-access-token:" + kStaticToken);
  // The echo carried the base64 form: redacted as well.
  EXPECT_EQ(r.body.find(basic.substr(6)), std::string::npos) << r.body;
}

TEST_F(ProxyCredentials, AHostNoRuleBindsGetsNoCredential) {
  const auto r = curl({"-H", "Authorization: Bearer mine", url("other.test", "/x")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(origin_.requests().at(0).header("Authorization"), "Bearer mine");
  EXPECT_EQ(github_.request_count(), 0u);
}

TEST_F(ProxyCredentials, APlaceholderIsReplacedWhereBoundAndATripwireElsewhere) {
  const std::string mine = placeholder(kId, "gh");
  const auto bound = curl({"-H", "Authorization: token " + mine, url("api.test", "/user")});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_EQ(origin_.requests().at(0).header("Authorization"), "Bearer " + kGitHubToken);

  // The same placeholder sent to a host its credential is not bound to: refused, logged.
  const auto exfil = curl({"-H", "X-Token: " + mine, url("other.test", "/collect")});
  EXPECT_EQ(exfil.http_code, 403);
  EXPECT_EQ(curl_header(exfil, "X-Sandgate-Error"), "SANDBOX_NETWORK_DENIED");
  EXPECT_EQ(origin_.request_count(), 1u);  // nothing reached other.test
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "placeholder_misuse", kId));
  EXPECT_EQ(json_string(*line, "rule.name"), "credentials.gh");
  EXPECT_EQ(daemon_->audit_text().find(mine), std::string::npos);

  // As the password of Basic credentials (git and credential helpers put tokens there): seen
  // decoded, refused on the unbound host, replaced on the bound one.
  const auto basic = curl({"-u", "x-access-token:" + mine, url("other.test", "/basic")});
  EXPECT_EQ(basic.http_code, 403);
  EXPECT_NE(basic.body.find("placeholder_misuse"), std::string::npos) << basic.body;
  EXPECT_EQ(origin_.request_count(), 1u);
  const auto basic_bound = curl({"-u", "x-access-token:" + mine, url("api.test", "/basic")});
  EXPECT_EQ(basic_bound.http_code, 200);
  ASSERT_EQ(origin_.request_count(), 2u);
  EXPECT_EQ(origin_.requests()[1].header("Authorization"), "Bearer " + kGitHubToken);
  EXPECT_EQ(origin_.raw_received().find(secrets::base64("x-access-token:" + mine)),
            std::string::npos);

  // Another sandbox's placeholder, even to the bound host, is refused too.
  const auto foreign =
      curl({"-H", "Authorization: token " + placeholder("sb2", "gh"), url("api.test", "/user")});
  EXPECT_EQ(foreign.http_code, 403);
  EXPECT_EQ(origin_.request_count(), 2u);
}

// THREATS 13, the body: a placeholder in a request body going to a host its credential is
// not bound to is refused like one in a header, wherever the relay's chunks cut it, and no
// byte of it reaches the destination; to the bound host the body goes through untouched.
TEST_F(ProxyCredentials, APlaceholderInARequestBodyTripsTheWireToo) {
  const std::string mine = placeholder(kId, "gh");
  const std::string small = R"({"note":"my token is )" + mine + R"("})";
  dir_.write("small.json", small);
  // Large, with the placeholder across the relay's 16 KiB chunk boundary, and sent chunked.
  std::string large = pattern_bytes(1u << 20, 3);
  large.replace(16 * 1024 - 20, mine.size(), mine);
  dir_.write("large.bin", large);
  // Over HTTP/2 too: the origin speaks HTTP/1.1, so the h2 client leg's bridge scans it.
  struct Upload {
    std::string name;
    std::vector<std::string> args;
    std::string version = "--http1.1";
  };
  const std::vector<Upload> uploads = {
      {"small", {"--data-binary", "@" + dir_.file("small.json")}},
      {"large_chunked",
       {"-H", "Transfer-Encoding: chunked", "--data-binary", "@" + dir_.file("large.bin")}},
      {"plain_http", {"--data-binary", "@" + dir_.file("small.json")}},
      {"small_h2", {"--data-binary", "@" + dir_.file("small.json")}, "--http2"},
      {"large_h2", {"--data-binary", "@" + dir_.file("large.bin")}, "--http2"},
  };
  std::size_t denials = 0;
  for (const auto& [name, args, version] : uploads) {
    std::vector<std::string> all = args;
    all.push_back(name == "plain_http"
                      ? "http://other.test:" + std::to_string(origin_.port()) + "/collect"
                      : url("other.test", "/collect"));
    const auto r = curl(all, version);
    EXPECT_EQ(r.http_code, 403) << name << " " << r.err;
    EXPECT_EQ(curl_header(r, "X-Sandgate-Error"), "SANDBOX_NETWORK_DENIED") << name;
    EXPECT_NE(r.body.find("placeholder_misuse"), std::string::npos) << name << r.body;
    ++denials;
  }
  EXPECT_EQ(origin_.request_count(), 0u);
  EXPECT_EQ(origin_.raw_received().find(mine), std::string::npos);
  EXPECT_EQ(origin_.raw_received().find(mine.substr(0, 20)), std::string::npos);
  // A line may be written just after its client saw the 403: wait for all of them.
  const auto misuse_lines = [&] {
    std::size_t n = 0;
    for (const auto& line : daemon_->audit_lines()) {
      n += json_string(line, "event.reason") == "placeholder_misuse" ? 1 : 0;
    }
    return n;
  };
  EXPECT_TRUE(eventually([&] { return misuse_lines() >= denials; })) << misuse_lines();
  std::size_t lines = 0;
  for (const auto& line : daemon_->audit_lines()) {
    if (json_string(line, "event.reason") != "placeholder_misuse") continue;
    EXPECT_EQ(json_string(line, "rule.name"), "credentials.gh");
    EXPECT_EQ(json_string(line, "destination.address"), "other.test");
    ++lines;
  }
  EXPECT_EQ(lines, denials);
  EXPECT_EQ(daemon_->audit_text().find(mine), std::string::npos);

  // To the host the credential is bound to, the body goes as it was sent (a placeholder is
  // worthless; only the header is replaced).
  for (const std::string version : {"--http1.1", "--http2"}) {
    const auto bound =
        curl({"--data-binary", "@" + dir_.file("large.bin"), url("api.test", "/up")}, version);
    EXPECT_EQ(bound.http_code, 200) << version << bound.err;
  }
  ASSERT_EQ(origin_.request_count(), 2u);
  for (const auto& request : origin_.requests()) {
    EXPECT_TRUE(request.body == large);
    EXPECT_EQ(request.header("Authorization"), "Bearer " + kGitHubToken);
  }
}

// THREATS 36: the tripwire reads what leaves sandgate, not only what came in: a placeholder
// spelled with escapes in the target (which is forwarded decoded to an inspected host), or as
// a field's name, or as the method, over HTTP/1.1 and HTTP/2. Control: an escape that spells no
// placeholder goes.
TEST_F(ProxyCredentials, ThePlaceholderTripwireReadsWhatLeaves) {
  const std::string mine = placeholder(kId, "gh");
  std::string escaped = mine;
  escaped.replace(escaped.find('_'), 1, "%5f");
  for (const std::string version : {"--http1.1", "--http2"}) {
    const auto in_path = curl({url("other.test", "/collect/" + escaped)}, version);
    EXPECT_EQ(in_path.http_code, 403) << version << in_path.err;
    EXPECT_NE(in_path.body.find("placeholder_misuse"), std::string::npos) << in_path.body;
    const auto as_name = curl({"-H", mine + ": 1", url("other.test", "/collect")}, version);
    EXPECT_EQ(as_name.http_code, 403) << version << as_name.err;
    EXPECT_NE(as_name.body.find("placeholder_misuse"), std::string::npos) << as_name.body;
    const auto as_method = curl({"-X", mine, url("other.test", "/collect")}, version);
    EXPECT_EQ(as_method.http_code, 403) << version << as_method.err;
    EXPECT_NE(as_method.body.find("placeholder_misuse"), std::string::npos) << as_method.body;
  }
  EXPECT_EQ(origin_.request_count(), 0u);
  EXPECT_EQ(origin_.raw_received().find(mine), std::string::npos);
  const auto control = curl({url("other.test", "/collect/sgph%2Dnot")});
  EXPECT_EQ(control.http_code, 200) << control.err;
  EXPECT_EQ(origin_.request_count(), 1u);
}

// THREATS 36, HTTP/2 request trailers: they leave after the body, and the tripwire reads them
// as it reads the body (h2_client.py sends a POST whose trailer holds the placeholder). Control:
// a trailer without one goes through.
TEST_F(ProxyCredentials, APlaceholderInHttp2RequestTrailersTripsTheWire) {
  const auto run = [&](const std::string& value) {
    const std::string port = std::to_string(origin_.port());
    return h2::test::run_peer(
        h2::test::h2_client({"--via", std::to_string(daemon_->explicit_port()), kId + ":" + kToken,
                             dir_.file("ca/ca.pem"), "other.test:" + port, "trailers", port,
                             "/trailers", "x-checksum=" + value}));
  };
  const std::string mine = placeholder(kId, "gh");
  auto refused = run(mine);
  EXPECT_EQ(refused["status"], "403") << refused["exit"];
  EXPECT_EQ(origin_.request_count(), 0u);
  EXPECT_EQ(origin_.raw_received().find(mine), std::string::npos);
  ASSERT_TRUE(daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED"));
  auto control = run("crc32-0badf00d");
  EXPECT_EQ(control["status"], "200") << control["exit"];
  EXPECT_EQ(origin_.request_count(), 1u);
}

TEST_F(ProxyCredentials, NoTokenToBeHadIs503SayingWhetherWaitingHelps) {
  github_.set_handler([](const TokenRequest&) {
    TokenResponse r;
    r.status = 503;
    r.body = R"({"message":"try later"})";
    return r;
  });
  const auto down = curl({url("api.test", "/down")});
  EXPECT_EQ(down.http_code, 503);
  EXPECT_EQ(curl_header(down, "X-Sandgate-Error"), "CREDENTIAL_UNAVAILABLE");
  EXPECT_NE(down.body.find(R"("retryable":true)"), std::string::npos) << down.body;
  EXPECT_EQ(origin_.request_count(), 0u);
  const auto line = daemon_->wait_audit_code("CREDENTIAL_UNAVAILABLE");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 503);
  // The line names the credential that could not be had, in its own field; no fingerprint,
  // as no token was attached.
  EXPECT_EQ(json_string(*line, "credential.name"), "gh");
  EXPECT_FALSE(json_string(*line, "credential.fingerprint"));

  // The same over HTTP/2.
  const std::size_t before = daemon_->audit_lines().size();
  const auto down2 = curl({url("api.test", "/down2")}, "--http2");
  EXPECT_EQ(down2.http_code, 503);
  const auto line2 = daemon_->wait_audit(
      [](const boost::json::object& l) {
        return json_string(l, "event.code") == "CREDENTIAL_UNAVAILABLE";
      },
      std::chrono::milliseconds(3000), before);
  ASSERT_TRUE(line2) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line2, "credential.name"), "gh");
}

TEST_F(ProxyCredentials, AnEndpointThatRefusesTheAppIs503NotRetryable) {
  // A wrong app or installation: waiting will not help, and the body says so.
  github_.set_handler([](const TokenRequest&) {
    TokenResponse r;
    r.status = 404;
    r.body = R"({"message":"Not Found"})";
    return r;
  });
  const auto r = curl({url("api.test", "/x")});
  EXPECT_EQ(r.http_code, 503);
  EXPECT_EQ(curl_header(r, "X-Sandgate-Error"), "CREDENTIAL_UNAVAILABLE");
  EXPECT_NE(r.body.find(R"("retryable":false)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("credential gh"), std::string::npos) << r.body;
  EXPECT_EQ(origin_.request_count(), 0u);
}

// A mint the endpoint refuses says why in the 503's audit line: the endpoint's HTTP status and
// the error its body names (GitHub's `message`), with a secret-looking word in it removed and
// nothing else of the body (which echoes a secret in another field) anywhere.
TEST_F(ProxyCredentials, AFailedMintSaysWhyInTheAuditLineAndNoSecret) {
  const std::string echoed = "ghs_ECHOEDsecretLOOKING0123456789abcdef";
  const std::string inline_secret = "ghp_INLINEsecret9876543210ZYXWVUTSrqpo";
  // By value: the server's thread calls its own copy of the handler (TSan: no shared strings).
  github_.set_handler([echoed, inline_secret](const TokenRequest&) {
    TokenResponse r;
    r.status = 401;
    r.body = R"({"message":"Bad credentials )" + inline_secret + R"(","echo":")" + echoed +
             R"(","documentation_url":"https://docs.github.com/rest"})";
    return r;
  });
  const auto r = curl({url("api.test", "/x")});
  EXPECT_EQ(r.http_code, 503);
  EXPECT_NE(r.body.find(R"("retryable":false)"), std::string::npos) << r.body;
  const auto line = daemon_->wait_audit_code("CREDENTIAL_UNAVAILABLE");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "credential.name"), "gh");
  EXPECT_EQ(json_int(*line, "credential.endpoint.status_code"), 401);
  EXPECT_EQ(json_string(*line, "credential.endpoint.error"), "Bad credentials [redacted]");
  EXPECT_EQ(json_int(*line, "http.response.status_code"), 503);  // what the sandbox got
  for (const std::string& secret : {echoed, inline_secret}) {
    EXPECT_EQ(daemon_->audit_text().find(secret), std::string::npos) << secret;
    EXPECT_EQ(daemon_->stderr_text().find(secret), std::string::npos) << secret;
    EXPECT_EQ((r.headers + r.body).find(secret), std::string::npos) << secret;
  }
  EXPECT_EQ(daemon_->audit_text().find("docs.github.com"), std::string::npos);

  // Control: once the endpoint mints, the request goes through, and no line names an endpoint
  // error.
  github_.set_handler([](const TokenRequest&) {
    TokenResponse ok;
    ok.status = 201;
    ok.body = R"({"token":")" + kGitHubToken + R"(","expires_at":"2099-01-01T00:00:00Z"})";
    return ok;
  });
  ASSERT_TRUE(eventually([&] { return curl({url("api.test", "/y")}).http_code == 200; },
                         std::chrono::seconds(20)));
  const auto good = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(good);
  EXPECT_EQ(json_string(*good, "credential.name"), "gh");
  EXPECT_FALSE(json_int(*good, "credential.endpoint.status_code"));
}

// THREATS 35: token endpoints are resolved by the daemon's c-ares resolver (the [dns] servers),
// each fetch under its own deadline. Sandbox sb2's two oauth2 credentials: `slow`, whose token
// URL names a host the DNS server never answers, and `fast`, whose name it answers. While the
// slow one's first request waits on its lookup, the fast one's first request gets its token at
// once; the slow one gets 503 CREDENTIAL_UNAVAILABLE when its fetch's deadline passes.
TEST_F(ProxyCredentials, ATokenUrlThatNeverResolvesStallsNoOtherCredential) {
  FakeDnsServer dns;
  dns.add_record("tokens.test", "127.0.0.1", 60);
  dns.set_reply("stuck.test", FakeDnsServer::Reply::drop);
  const std::string kFastToken = "oa_FASTtoken0123456789abcdefghij";
  FakeTokenServer oauth(
      [&](const TokenRequest& r) {
        if (r.target != "/oauth/token") return TokenResponse{404, "{}"};
        return TokenResponse{200, R"({"access_token":")" + kFastToken + R"(","expires_in":3600})"};
      },
      {"tokens.test"});
  dir_.write("client-secret", "s3cret-client\n");
  ::chmod(dir_.file("client-secret").c_str(), 0600);
  const std::string oauth2 =
      "provider = \"oauth2_client_credentials\"\nclient_id = \"sg\"\n"
      "client_secret_file = \"" +
      dir_.file("client-secret") + "\"\nca_file = \"" + oauth.ca_file() + "\"\n";
  const std::string sb2 = "tok-sb2-credentials-Pz8";
  const std::string tables =
      "[dns]\nservers = [\"" + dns.address() + "\"]\ntimeout_ms = 10000\n" + this->tables() +
      "\n[credentials.slow]\n" + oauth2 +
      "token_url = \"https://stuck.test:" + std::to_string(oauth.port()) +
      "/oauth/token\"\ntimeout = \"1500ms\"\n\n" + "[credentials.fast]\n" + oauth2 +
      "token_url = \"" + oauth.url_for("tokens.test") +
      "/oauth/token\"\n\n[sandboxes.sb2]\ntoken = \"" + sb2 + "\"\nports = [" +
      std::to_string(origin_.port()) +
      "]\nallow = [\"api.test\", \"npm.test\"]\nallow_cidrs = [\"127.0.0.1/32\"]\n\n"
      "[[sandboxes.sb2.inject]]\nhosts = [\"api.test\"]\ncredential = \"slow\"\nas = \"bearer\"\n\n"
      "[[sandboxes.sb2.inject]]\nhosts = [\"npm.test\"]\ncredential = \"fast\"\nas = \"bearer\"\n";
  daemon_.reset();
  daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables});
  const auto sb2_curl = [&](const std::string& target) {
    return run_curl({"--http1.1", "-x", daemon_->proxy_url("sb2", sb2), "--cacert",
                     dir_.file("ca/ca.pem"), target});
  };

  const auto started = std::chrono::steady_clock::now();
  auto slow = std::async(std::launch::async, [&] { return sb2_curl(url("api.test", "/slow")); });
  ASSERT_TRUE(eventually([&] { return dns.queries("stuck.test") > 0; }));

  const auto before = std::chrono::steady_clock::now();
  const auto fast = sb2_curl(url("npm.test", "/fast"));
  const auto fast_took = std::chrono::steady_clock::now() - before;
  EXPECT_EQ(fast.http_code, 200) << fast.err << fast.body;
  EXPECT_LT(fast_took, std::chrono::milliseconds(1000));
  EXPECT_EQ(slow.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  ASSERT_EQ(origin_.request_count(), 1u);
  EXPECT_EQ(origin_.requests()[0].header("Authorization"), "Bearer " + kFastToken);
  EXPECT_EQ(oauth.request_count(), 1u);  // the fast one's; the slow one never connected
  EXPECT_EQ(dns.queries("tokens.test", FakeDnsServer::kTypeA), 1u);

  const auto stuck = slow.get();
  const auto slow_took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(stuck.http_code, 503) << stuck.err;
  EXPECT_EQ(curl_header(stuck, "X-Sandgate-Error"), "CREDENTIAL_UNAVAILABLE");
  EXPECT_NE(stuck.body.find(R"("retryable":true)"), std::string::npos) << stuck.body;
  EXPECT_NE(stuck.body.find("cannot resolve stuck.test: timed out"), std::string::npos)
      << stuck.body;
  EXPECT_GE(slow_took, std::chrono::milliseconds(1400));
  // Its fetch's deadline ended it (the message says the lookup timed out), not the request's
  // wait (connect_timeout_ms, 2 s: "no token ... within 2000 ms").
  EXPECT_LT(slow_took, std::chrono::milliseconds(3000));
  EXPECT_EQ(origin_.request_count(), 1u);
  EXPECT_EQ(daemon_->stderr_text().find(kFastToken), std::string::npos);
}

}  // namespace
}  // namespace sandgate::test
