// Git over HTTP through an intercepted host: the real git client through the explicit proxy
// against the real `git http-backend` behind TLS (a GitHub-like remote in the test, serving
// smart and dumb HTTP), and `[[...git]]` rules that allow fetch everywhere under acme/ but push
// to one repository only, and nothing under locked/. A refused push must read clearly in git's
// own output; a clone over dumb HTTP (THREATS 33) is decided by the same rules.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/git_origin.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "agent";
const std::string kToken = "tok-agent-git-8Jw";

class ProxyGit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(run_command({sandgate_binary(), "ca", "init", ca_.file("ca")}).exit_code, 0);
    for (const std::string repo : {"widgets", "open"}) {
      ASSERT_EQ(make_bare_repository(repos_.file("acme/" + repo + ".git"), "README", "hi\n"), "");
    }
    ASSERT_EQ(make_bare_repository(repos_.file("other/thing.git"), "README", "x\n"), "");
    ASSERT_EQ(make_bare_repository(repos_.file("locked/vault.git"), "SECRET", "s\n"), "");
    origin_.set_handler(git_http_backend(repos_.path().string()));
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  std::string tables() const {
    return R"(
[limits]
idle_timeout_ms = 10000

[dns.hosts]
"git.test" = ["127.0.0.1"]

[interception]
ca_cert = ")" +
           ca_.file("ca/ca.pem") +
           R"("
ca_key = ")" +
           ca_.file("ca/ca.key") +
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
allow = ["git.test"]
allow_cidrs = ["127.0.0.1/32"]

[[sandboxes.agent.git]]
repos = ["git.test/acme/open"]
allow = ["fetch", "push"]

[[sandboxes.agent.git]]
repos = ["git.test/acme/*"]
allow = ["fetch"]

[[sandboxes.agent.git]]
repos = ["git.test/locked/*"]
allow = []
)";
  }

  std::string remote(const std::string& repo) const {
    return "https://git.test:" + std::to_string(origin_.port()) + "/" + repo;
  }

  // The real git, through the proxy, trusting sandgate's CA and nothing else. `smart` false:
  // git's dumb HTTP protocol only (GIT_SMART_HTTP=0).
  CommandResult git(std::vector<std::string> args, bool smart = true) const {
    std::vector<std::string> argv = {
        "env", "GIT_TERMINAL_PROMPT=0", "GIT_SMART_HTTP=" + std::string(smart ? "1" : "0"),
        "HOME=" + home_.path().string(),
        // (git 2.39 with libcurl-gnutls here ignores `-c http.sslCAInfo`; the variable works.)
        "GIT_SSL_CAINFO=" + ca_.file("ca/ca.pem"), "git", "-c",
        "http.proxy=" + daemon_->proxy_url(kId, kToken), "-c", "http.proxyAuthMethod=basic", "-c",
        "user.name=agent", "-c", "user.email=agent@example.test"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, std::chrono::seconds(30));
  }

  // Clones `repo`, commits a change, and pushes it; returns the push.
  CommandResult clone_commit_push(const std::string& repo) const {
    const std::string dir = work_.file(repo.substr(repo.rfind('/') + 1));
    const CommandResult clone = git({"clone", "-q", remote(repo), dir});
    EXPECT_EQ(clone.exit_code, 0) << clone.err;
    work_.write(dir.substr(work_.path().string().size() + 1) + "/CHANGE", "agent was here\n");
    EXPECT_EQ(git({"-C", dir, "add", "CHANGE"}).exit_code, 0);
    EXPECT_EQ(git({"-C", dir, "commit", "-q", "-m", "change"}).exit_code, 0);
    return git({"-C", dir, "push", "-q", "origin", "main"});
  }

  std::string head_of(const std::string& bare) const {
    return run_command({"git", "--git-dir", repos_.file(bare), "rev-parse", "main"}).out;
  }

  TempDir ca_;
  TempDir repos_;
  TempDir work_;
  TempDir home_;
  const TestCertificate origin_cert_ = make_self_signed_certificate({"git.test"}, {});
  const std::string roots_ = ca_.write("origin.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyGit, CloneAndFetchAreAllowedUnderTheRule) {
  const std::string dir = work_.file("widgets");
  const auto clone = git({"clone", "-q", remote("acme/widgets.git"), dir});
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  EXPECT_EQ(read_file(dir + "/README"), "hi\n");
  const auto fetch = git({"-C", dir, "fetch", "-q", "origin"});
  EXPECT_EQ(fetch.exit_code, 0) << fetch.err;

  // The discovery request and the upload-pack POST, each its own line.
  const auto post = daemon_->wait_audit([](const boost::json::object& l) {
    return json_string(l, "event.code") == "http_request" &&
           json_string(l, "http.request.method") == "POST";
  });
  ASSERT_TRUE(post);
  EXPECT_EQ(json_string(*post, "url.path"), "/acme/widgets.git/git-upload-pack");
  EXPECT_EQ(json_string(*post, "url.scheme"), "https");
  EXPECT_EQ(json_string(*post, "rule.name"), "sandboxes.agent.git[1]:git.test/acme/*");
}

TEST_F(ProxyGit, APushTheRuleRefusesReadsClearlyInGitsOutputAndChangesNothing) {
  const std::string before = head_of("acme/widgets.git");
  const auto push = clone_commit_push("acme/widgets.git");
  EXPECT_NE(push.exit_code, 0);
  // git prints an ERR pkt-line of the discovery reply as the remote's message.
  EXPECT_NE(push.err.find("remote error: sandgate: SANDBOX_NETWORK_DENIED"), std::string::npos)
      << push.err;
  EXPECT_NE(push.err.find("git_not_allowed"), std::string::npos) << push.err;
  EXPECT_NE(push.err.find("retrying will not help"), std::string::npos) << push.err;
  EXPECT_EQ(head_of("acme/widgets.git"), before);

  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "git_not_allowed");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "http.request.method"), "GET");
  EXPECT_EQ(json_string(*line, "url.path"), "/acme/widgets.git/info/refs");
  EXPECT_EQ(json_string(*line, "url.scheme"), "https");
  EXPECT_EQ(json_string(*line, "rule.name"), "sandboxes.agent.git[1]:git.test/acme/*");
}

TEST_F(ProxyGit, APushTheRuleAllowsLands) {
  const std::string before = head_of("acme/open.git");
  const auto push = clone_commit_push("acme/open.git");
  ASSERT_EQ(push.exit_code, 0) << push.err;
  EXPECT_NE(head_of("acme/open.git"), before);
}

TEST_F(ProxyGit, ARepositoryNoRuleNamesIsRefusedEvenForFetch) {
  const auto clone = git({"clone", "-q", remote("other/thing.git"), work_.file("thing")});
  EXPECT_NE(clone.exit_code, 0);
  EXPECT_NE(clone.err.find("remote error: sandgate: SANDBOX_NETWORK_DENIED"), std::string::npos)
      << clone.err;
}

// THREATS 33: git's dumb protocol reads info/refs without a service, HEAD and objects/...
// one file at a time. Those are the repository's fetch: a rule that refuses it refuses them
// (and the credential-carrying request never leaves), one that allows it allows them.
TEST_F(ProxyGit, ADumbHttpCloneIsDecidedByTheGitRules) {
  const auto refused = git({"clone", "-q", remote("locked/vault.git"), work_.file("vault")}, false);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("returned error: 403"), std::string::npos) << refused.err;
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "git_not_allowed");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "http.request.method"), "GET");
  EXPECT_EQ(json_string(*line, "url.path"), "/locked/vault.git/info/refs");
  EXPECT_EQ(json_string(*line, "rule.name"), "sandboxes.agent.git[2]:git.test/locked/*");
  // Each file the dumb client would read next is refused the same way.
  for (const std::string path :
       {"/locked/vault.git/HEAD", "/locked/vault.git/objects/info/packs"}) {
    const CurlResult r = run_curl({"-x", daemon_->proxy_url(kId, kToken), "--cacert",
                                   ca_.file("ca/ca.pem"), remote(path.substr(1))});
    EXPECT_EQ(r.http_code, 403) << path << " " << r.err;
  }
  for (const RecordedRequest& seen : origin_.requests()) {
    EXPECT_FALSE(seen.target.starts_with("/locked/")) << seen.method << " " << seen.target;
  }

  // Control: an allowed repository clones over dumb HTTP alone.
  const std::string dir = work_.file("widgets");
  const auto clone = git({"clone", "-q", remote("acme/widgets.git"), dir}, false);
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  EXPECT_EQ(read_file(dir + "/README"), "hi\n");
  bool dumb_refs = false;
  bool objects = false;
  for (const RecordedRequest& seen : origin_.requests()) {
    EXPECT_EQ(seen.target.find("service="), std::string::npos) << seen.target;
    dumb_refs = dumb_refs || seen.target == "/acme/widgets.git/info/refs";
    objects = objects || seen.target.starts_with("/acme/widgets.git/objects/");
  }
  EXPECT_TRUE(dumb_refs);
  EXPECT_TRUE(objects);
}

}  // namespace
}  // namespace sandgate::test
