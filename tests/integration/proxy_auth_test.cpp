// Explicit-proxy authentication: 407 PROXY_AUTH_REQUIRED for a missing, wrong or malformed
// Proxy-Authorization, and for a kept-alive connection that changes identity. The body's
// `reason` (and the status line) tell the client which, except that an unknown id and a wrong
// token look the same to it (invalid_credentials); the audit line tells them apart.
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <memory>
#include <string>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"

namespace sandgate::test {
namespace {

const std::string kToken1 = "tok-one-Hq4mWv9s";
const std::string kToken2 = "tok-two-Lr7cNx2e";

class ProxyAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string p = std::to_string(origin_.port());
    SandgateOptions options;
    options.tables = R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]

[profiles.local]
allow = ["origin.test:)" +
                     p + R"("]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.sb1]
profile = "local"
token = ")" + kToken1 +
                     R"("

[sandboxes.sb2]
profile = "local"
token = ")" + kToken2 +
                     R"("
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::string authority() const { return "origin.test:" + std::to_string(origin_.port()); }

  // The 407 body's `reason` for an audit line's `why` (docs/errors.md).
  static std::string told(const std::string& why) {
    return why == "wrong_token" || why == "unknown_sandbox_id" ? "invalid_credentials" : why;
  }

  // Sends a request with the given raw Proxy-Authorization line ("" = none) and checks the 407
  // and its line: event.reason `why`, labels.sandbox_id `named` (a known id whose token was
  // wrong; never an unknown id), and for plain HTTP the method and path without the query.
  void expect_407(const std::string& auth_line, bool connect, const std::string& why,
                  const std::string& named = "") {
    const std::size_t lines_before = daemon_->audit_lines().size();
    RawClient c(daemon_->explicit_port());
    const std::string head = connect ? "CONNECT " + authority() + " HTTP/1.1\r\n"
                                     : "GET http://" + authority() + "/p?q=1 HTTP/1.1\r\n";
    ASSERT_TRUE(c.send(head + "Host: " + authority() + "\r\n" + auth_line + "\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r) << auth_line;
    ASSERT_TRUE(IsSandgateError(*r, 407, "PROXY_AUTH_REQUIRED", false)) << auth_line;
    EXPECT_EQ(r->header("Proxy-Authenticate"), "Basic realm=\"sandgate\"");
    EXPECT_FALSE(error_field(*r, "sandbox")) << r->body;
    EXPECT_EQ(error_field(*r, "reason"), told(why)) << r->body;
    EXPECT_TRUE(c.wait_closed()) << auth_line;
    const auto line = daemon_->wait_audit(
        [](const boost::json::object& o) {
          return json_string(o, "event.code") == "PROXY_AUTH_REQUIRED";
        },
        std::chrono::milliseconds(3000), lines_before);
    EXPECT_TRUE(AuditLineIs(line, "PROXY_AUTH_REQUIRED", why, named)) << auth_line;
    EXPECT_EQ(r->reason,
              "PROXY_AUTH_REQUIRED " + authority() + " (" + told(why) + "; not retryable)");
    if (line) {
      EXPECT_EQ(json_string(*line, "network.protocol"), connect ? "connect" : "http");
      EXPECT_EQ(json_int(*line, "http.response.status_code"), 407);
      // The challenge is not a failure; everything else is.
      EXPECT_EQ(json_string(*line, "event.outcome"),
                why == "no_credentials" ? "unknown" : "failure");
      if (connect) {
        EXPECT_FALSE(json_string(*line, "url.path"));
      } else {
        EXPECT_EQ(json_string(*line, "http.request.method"), "GET");
        EXPECT_EQ(json_string(*line, "url.path"), "/p");
      }
      EXPECT_EQ(boost::json::serialize(*line).find("q=1"), std::string::npos);
    }
  }

  HttpOrigin origin_;
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyAuth, MissingCredentialsGet407WithAChallenge) {
  expect_407("", false, "no_credentials");
  expect_407("", true, "no_credentials");
  const auto curl = run_curl({"-x", "http://127.0.0.1:" + std::to_string(daemon_->explicit_port()),
                              "http://" + authority() + "/"});
  EXPECT_EQ(curl.exit_code, 0) << curl.err;
  EXPECT_EQ(curl.http_code, 407);
  EXPECT_EQ(curl_header(curl, "X-Sandgate-Error"), "PROXY_AUTH_REQUIRED");
  EXPECT_EQ(origin_.connection_count(), 0u);
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
}

TEST_F(ProxyAuth, WrongTokenOrUnknownSandboxGet407) {
  expect_407(proxy_auth_line("sb1", "wrong-token"), false, "wrong_token", "sb1");
  expect_407(proxy_auth_line("sb1", kToken2), true, "wrong_token", "sb1");  // another's token
  expect_407(proxy_auth_line("nobody", kToken1), false, "unknown_sandbox_id");
  expect_407(proxy_auth_line(kToken1, "sb1"), true, "unknown_sandbox_id");  // swapped: unnamed
  expect_407(proxy_auth_line("sb1", kToken1 + "x"), false, "wrong_token", "sb1");
  expect_407(proxy_auth_line("sb1", ""), false, "wrong_token", "sb1");
  // No token and no unknown id ever reaches the log.
  EXPECT_EQ(daemon_->audit_text().find(kToken1), std::string::npos);
  EXPECT_EQ(daemon_->audit_text().find("nobody"), std::string::npos);
  const auto curl =
      run_curl({"-x", daemon_->proxy_url("sb1", "wrong-token"), "http://" + authority() + "/"});
  EXPECT_EQ(curl.http_code, 407);
  EXPECT_EQ(origin_.connection_count(), 0u);
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
}

// An unauthenticated client cannot tell whether a sandbox id exists: a wrong token for a known
// id and any token for an unknown one get the same bytes back (the audit line and the metric
// tell them apart). What it sent wrong otherwise (nothing, a malformed value) it is told.
TEST_F(ProxyAuth, UnknownIdAndWrongTokenLookTheSameToTheClient) {
  const auto refused = [&](const std::string& auth_line) {
    RawClient c(daemon_->explicit_port());
    EXPECT_TRUE(c.send("GET http://" + authority() + "/p HTTP/1.1\r\nHost: " + authority() +
                       "\r\n" + auth_line + "\r\n"));
    const auto r = c.read_response();
    EXPECT_TRUE(r) << auth_line;
    return r ? std::to_string(r->status) + " " + r->reason + "\n" + r->body : std::string();
  };
  const std::string wrong = refused(proxy_auth_line("sb1", "wrong-token"));
  const std::string unknown = refused(proxy_auth_line("nobody", "wrong-token"));
  EXPECT_EQ(wrong, unknown);
  EXPECT_NE(wrong.find("invalid_credentials"), std::string::npos) << wrong;
  EXPECT_EQ(wrong.find("sb1"), std::string::npos) << wrong;
  const std::string none = refused("");
  const std::string malformed = refused("Proxy-Authorization: Bearer x\r\n");
  EXPECT_NE(none.find("\"reason\":\"no_credentials\""), std::string::npos) << none;
  EXPECT_NE(malformed.find("\"reason\":\"malformed_credentials\""), std::string::npos) << malformed;
  EXPECT_NE(none, wrong);
  EXPECT_NE(malformed, wrong);
  // The log does tell them apart.
  EXPECT_TRUE(daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.reason") == "wrong_token";
  }));
  EXPECT_TRUE(daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.reason") == "unknown_sandbox_id";
  }));
  // Control: the right token for the same id gets through.
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
}

TEST_F(ProxyAuth, MalformedCredentialsGet407) {
  for (const std::string& value : std::vector<std::string>{
           "Basic !!!not-base64!!!", "Basic " + base64("sb1" + kToken1) /* no colon */, "Basic",
           "Bearer " + kToken1, "Basic " + base64("sb1:" + kToken1).substr(1),
           "Digest username=\"sb1\""}) {
    expect_407("Proxy-Authorization: " + value + "\r\n", false, "malformed_credentials");
  }
  EXPECT_EQ(origin_.connection_count(), 0u);
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
}

// The metrics tell a probe from an attack: each outcome counted on its own, the challenge not
// as an error, and no sandbox id as a label.
TEST_F(ProxyAuth, MetricsCountEachOutcomeAndTheChallengeIsNoError) {
  expect_407("", false, "no_credentials");
  expect_407("", true, "no_credentials");
  expect_407(proxy_auth_line("sb1", "wrong-token"), false, "wrong_token", "sb1");
  expect_407(proxy_auth_line("nobody", kToken1), true, "unknown_sandbox_id");
  expect_407("Proxy-Authorization: Bearer x\r\n", false, "malformed_credentials");
  ASSERT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
  const std::string text = daemon_->metrics_text();
  const auto auth = [&](const std::string& outcome) {
    return metric_value(text, "sandgate_proxy_auth_total", {{"outcome", outcome}});
  };
  EXPECT_EQ(auth("no_credentials"), 2.0) << text;
  EXPECT_EQ(auth("wrong_token"), 1.0);
  EXPECT_EQ(auth("unknown_sandbox_id"), 1.0);
  EXPECT_EQ(auth("malformed_credentials"), 1.0);
  EXPECT_EQ(auth("identity_changed"), 0.0);
  EXPECT_GE(auth("ok").value_or(0), 1.0);
  // Three failures; the two challenges are not among them.
  EXPECT_EQ(metric_value(text, "sandgate_errors_total",
                         {{"code", "PROXY_AUTH_REQUIRED"}, {"side", "client"}}),
            3.0);
  EXPECT_EQ(text.find("nobody"), std::string::npos);
  EXPECT_EQ(text.find("sb1"), std::string::npos);
}

TEST_F(ProxyAuth, AKeptAliveConnectionCannotSwitchIdentity) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_get(authority(), "/first", "sb1", kToken1)));
  const auto first = c.read_response();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);

  ASSERT_TRUE(c.send(proxy_get(authority(), "/second", "sb2", kToken2)));
  const auto second = c.read_response();
  ASSERT_TRUE(second);
  ASSERT_TRUE(IsSandgateError(*second, 407, "PROXY_AUTH_REQUIRED", false));
  EXPECT_EQ(error_field(*second, "reason"), "identity_changed") << second->body;
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(origin_.request_count(), 1u);

  const auto line = daemon_->wait_audit_code("PROXY_AUTH_REQUIRED");
  EXPECT_TRUE(AuditLineIs(line, "PROXY_AUTH_REQUIRED", "identity_changed", "sb1"));  // bound one

  // A request without credentials on a bound connection is refused too.
  RawClient d(daemon_->explicit_port());
  ASSERT_TRUE(d.send(proxy_get(authority(), "/a", "sb2", kToken2)));
  ASSERT_TRUE(d.read_response());
  ASSERT_TRUE(d.send(proxy_get(authority(), "/b", "", "")));
  const auto anonymous = d.read_response();
  ASSERT_TRUE(anonymous);
  EXPECT_TRUE(IsSandgateError(*anonymous, 407, "PROXY_AUTH_REQUIRED", false));
  // Logged as a challenge, for the connection's sandbox.
  const auto asked = daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.reason") == "no_credentials";
  });
  EXPECT_TRUE(AuditLineIs(asked, "PROXY_AUTH_REQUIRED", "no_credentials", "sb2"));

  // Each identity still works on its own connection.
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb2", kToken2));
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", "sb1", kToken1));
}

TEST_F(ProxyAuth, SchemeAndSpacingAreTolerantButTheSecretIsExact) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send("GET http://" + authority() + "/ HTTP/1.1\r\nHost: " + authority() +
                     "\r\nProxy-Authorization: basic   " + base64("sb1:" + kToken1) + "\r\n\r\n"));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace sandgate::test
