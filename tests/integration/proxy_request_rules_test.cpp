// Method and path rules as strong as the origin (THREATS 32), through the real daemon and real
// curl: a deny list before a broad allow, on an intercepted host that keeps the case of its
// paths (api.test) and on one sandgate knows ignores it (api.github.com, resolved to loopback
// here). A method in lowercase, a HEAD under a GET rule, a method-override field or `_method`
// parameter, and a path in another case each meet the deny rule; each refusal has its allowed
// control, and a refused request never reaches the origin.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "agent";
const std::string kToken = "tok-agent-rules-4Kd";
const std::string kDenyDelete = "sandboxes.agent.http_rules[0]";
const std::string kDenyGet = "sandboxes.agent.http_rules[1]";
const std::string kDenyFolded = "sandboxes.agent.http_rules[2]";

class ProxyRequestRules : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ca = run_command({sandgate_binary(), "ca", "init", dir_.file("ca")});
    ASSERT_EQ(ca.exit_code, 0) << ca.err;
    // Names the method and target; a HEAD gets the head alone.
    origin_.set_handler([](const RecordedRequest& r) {
      if (r.method == "HEAD") return OriginReply::head_only(200, {{"Content-Length", "0"}});
      return OriginReply::with_length(200, "served " + r.method + " " + r.target + "\n");
    });
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  std::string tables() const {
    return R"(
[limits]
idle_timeout_ms = 5000

[dns.hosts]
"api.test" = ["127.0.0.1"]
"api.github.com" = ["127.0.0.1"]
"narrow.test" = ["127.0.0.1"]

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

[sandboxes.agent]
token = ")" +
           kToken +
           R"("
ports = [)" +
           std::to_string(origin_.port()) +
           R"(]
allow = ["api.test", "api.github.com", "narrow.test"]
allow_cidrs = ["127.0.0.1/32"]

[[sandboxes.agent.http_rules]]
hosts = ["api.test", "api.github.com"]
methods = ["DELETE"]
paths = ["/repos/acme/prod/**"]
action = "deny"

[[sandboxes.agent.http_rules]]
hosts = ["api.test", "api.github.com"]
methods = ["GET"]
paths = ["/secret/**"]
action = "deny"

[[sandboxes.agent.http_rules]]
hosts = ["api.test"]
methods = ["DELETE"]
paths = ["/cased/acme/**"]
path_case = "insensitive"
action = "deny"

[[sandboxes.agent.http_rules]]
hosts = ["api.test", "api.github.com"]
action = "allow"

[[sandboxes.agent.http_rules]]
hosts = ["narrow.test"]
methods = ["GET"]
action = "allow"
)";
  }

  std::string url(const std::string& host, const std::string& target) const {
    return "https://" + host + ":" + std::to_string(origin_.port()) + target;
  }
  CurlResult curl(std::vector<std::string> args, const std::string& version = "--http1.1") const {
    std::vector<std::string> all = {version, "-x", daemon_->proxy_url(kId, kToken), "--cacert",
                                    dir_.file("ca/ca.pem")};
    all.insert(all.end(), args.begin(), args.end());
    return run_curl(all);
  }

  // The request was refused by `rule` (403 SANDBOX_NETWORK_DENIED, an audit line naming the
  // rule, the method as sent and the path) and never reached the origin.
  void expect_refused(const CurlResult& r, const std::string& method, const std::string& path,
                      const std::string& rule) const {
    EXPECT_EQ(r.http_code, 403) << r.err;
    EXPECT_EQ(curl_header(r, "X-Sandgate-Error"), "SANDBOX_NETWORK_DENIED");
    const auto line = daemon_->wait_audit([&](const boost::json::object& l) {
      return json_string(l, "event.code") == "SANDBOX_NETWORK_DENIED" &&
             json_string(l, "http.request.method") == method && json_string(l, "url.path") == path;
    });
    ASSERT_TRUE(line) << method << " " << path;
    EXPECT_EQ(json_string(*line, "event.reason"), "denied_by_http_rule");
    EXPECT_EQ(json_string(*line, "rule.name"), rule);
    for (const RecordedRequest& seen : origin_.requests()) {
      EXPECT_FALSE(seen.target.starts_with(path)) << seen.method << " " << seen.target;
    }
  }

  // The origin served it, and received `method` for `target`.
  void expect_served(const CurlResult& r, const std::string& method,
                     const std::string& target) const {
    EXPECT_EQ(r.http_code, 200) << r.err << r.body;
    bool seen = false;
    for (const RecordedRequest& got : origin_.requests()) {
      seen = seen || (got.method == method && got.target == target);
    }
    EXPECT_TRUE(seen) << method << " " << target;
  }

  TempDir dir_;
  const TestCertificate origin_cert_ =
      make_self_signed_certificate({"api.test", "api.github.com", "narrow.test"}, {"127.0.0.1"});
  TempDir roots_dir_;
  const std::string roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyRequestRules, AMethodInAnyCaseMeetsTheDenyRule) {
  expect_refused(curl({"-X", "DELETE", url("api.test", "/repos/acme/prod/db")}), "DELETE",
                 "/repos/acme/prod/db", kDenyDelete);
  expect_refused(curl({"-X", "delete", url("api.test", "/repos/acme/prod/t1")}), "delete",
                 "/repos/acme/prod/t1", kDenyDelete);
  // Control: the same method elsewhere is allowed, and reaches the origin as sent.
  expect_served(curl({"-X", "delete", url("api.test", "/repos/acme/dev/db")}), "delete",
                "/repos/acme/dev/db");
}

// Issue 37: a request no rule matches is refused with the rule that would allow it, an
// array-of-tables block (it works after the table's [[...http_rules]] entries); the audit line
// carries the same.
TEST_F(ProxyRequestRules, NoMatchingRuleSuggestsABlockForExactlyThatRequest) {
  const CurlResult r = curl({"-X", "POST", url("narrow.test", "/upload/./a%7Eb")});
  EXPECT_EQ(r.http_code, 403) << r.err;
  const auto body = parse_object(r.body);
  ASSERT_TRUE(body) << r.body;
  EXPECT_EQ(json_string(*body, "reason"), "no_matching_http_rule");
  const std::string block =
      "[[sandboxes.agent.http_rules]]\nhosts = [\"narrow.test:" + std::to_string(origin_.port()) +
      "\"]\nmethods = [\"POST\"]\npaths = [\"/upload/a~b\"]\naction = \"allow\"";
  EXPECT_EQ(json_string(*body, "suggestion"), block);
  const auto line = daemon_->wait_audit([&](const boost::json::object& l) {
    return json_string(l, "event.code") == "SANDBOX_NETWORK_DENIED" &&
           json_string(l, "destination.address") == "narrow.test";
  });
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "labels.suggestion"), block);
  // Control: the method the rule names is served.
  expect_served(curl({url("narrow.test", "/upload/x")}), "GET", "/upload/x");
}

TEST_F(ProxyRequestRules, AGetRuleCoversHead) {
  expect_refused(curl({"-I", url("api.test", "/secret/key")}), "HEAD", "/secret/key", kDenyGet);
  // Control: a HEAD elsewhere.
  expect_served(curl({"-I", url("api.test", "/public/key")}), "HEAD", "/public/key");
}

TEST_F(ProxyRequestRules, AnOverrideIsDecidedAsWellAsTheMethodSent) {
  const std::string prod = "/repos/acme/prod/db";
  int n = 0;
  for (const char* field : {"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}) {
    const std::string path = prod + std::to_string(++n);
    expect_refused(
        curl({"-X", "POST", "-H", std::string(field) + ": delete", url("api.test", path)}), "POST",
        path, kDenyDelete);
  }
  expect_refused(curl({"-X", "POST", url("api.test", prod + "q?_method=DELETE")}), "POST",
                 prod + "q", kDenyDelete);
  // Over HTTP/2 too (its own codec, the same fields).
  expect_refused(
      curl({"-X", "POST", "-H", "X-HTTP-Method-Override: DELETE", url("api.test", prod + "h2")},
           "--http2"),
      "POST", prod + "h2", kDenyDelete);
  // Controls: the POST alone, and the override where DELETE is allowed, go through with the
  // field as sent.
  expect_served(curl({"-X", "POST", url("api.test", prod)}), "POST", prod);
  const auto elsewhere = curl(
      {"-X", "POST", "-H", "X-HTTP-Method-Override: DELETE", url("api.test", "/repos/acme/dev")});
  expect_served(elsewhere, "POST", "/repos/acme/dev");
  for (const RecordedRequest& got : origin_.requests()) {
    if (got.target == "/repos/acme/dev") {
      EXPECT_EQ(got.header("X-HTTP-Method-Override"), "DELETE");
    }
  }
}

TEST_F(ProxyRequestRules, PathsWithoutCaseOnGitHubAndWhereARuleSaysSo) {
  // api.github.com resolves owners and repositories without case: so do its rules.
  expect_refused(curl({"-X", "DELETE", url("api.github.com", "/repos/ACME/Prod/db")}), "DELETE",
                 "/repos/ACME/Prod/db", kDenyDelete);
  // A rule that says path_case = "insensitive", on a host that keeps case otherwise.
  expect_refused(curl({"-X", "DELETE", url("api.test", "/Cased/ACME/x")}), "DELETE",
                 "/Cased/ACME/x", kDenyFolded);
  // Controls: api.test keeps case, so the first rule does not name /repos/ACME/...; other
  // repositories are allowed on both hosts.
  expect_served(curl({"-X", "DELETE", url("api.test", "/repos/ACME/prod/db")}), "DELETE",
                "/repos/ACME/prod/db");
  expect_served(curl({"-X", "DELETE", url("api.github.com", "/repos/acme/dev/db")}), "DELETE",
                "/repos/acme/dev/db");
  expect_served(curl({"-X", "DELETE", url("api.test", "/cased/other/x")}), "DELETE",
                "/cased/other/x");
}

}  // namespace
}  // namespace sandgate::test
