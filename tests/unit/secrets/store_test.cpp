// The CredentialStore with real providers: github_app and oauth2 against a fake HTTPS token
// endpoint on loopback (its own CA), exec with real scripts, static with a real file.
#include "secrets/store.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <sys/stat.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <future>
#include <thread>

#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/https_client.hpp"
#include "support/eventually.hpp"
#include "support/fake_dns_server.hpp"
#include "support/fake_token_server.hpp"
#include "support/github_app_key.hpp"
#include "support/temp_dir.hpp"
#include "unit/secrets/store_test_support.hpp"

namespace sandgate::secrets {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

using test_support::get;
using test_support::ManualClock;
using test_support::rfc3339;

using test::AppKey;
using test::base64url_decode;

// A GitHub-shaped API: mints "ghs_<n>" tokens valid for an hour of `clock`, records scopes.
class FakeGithub {
 public:
  explicit FakeGithub(ManualClock& clock)
      : clock_(clock), server_([this](const test::TokenRequest& r) { return answer(r); }) {}

  test::FakeTokenServer& server() { return server_; }
  std::function<test::TokenResponse(const test::TokenRequest&)> override;
  std::chrono::milliseconds delay{0};

 private:
  test::TokenResponse answer(const test::TokenRequest& r) {
    if (override) return override(r);
    if (r.method == "GET" && r.target == "/orgs/acme/installation") return {404, "{}"};
    if (r.method == "GET" && r.target == "/users/acme/installation") {
      return {200, R"({"id": 99, "account": {"login": "acme"}})"};
    }
    if (r.method != "POST" || !r.target.ends_with("/access_tokens")) return {404, "{}"};
    const int n = ++minted_;
    json::object body;
    body["token"] = "ghs_minted" + std::to_string(n) + "xxxxxxxxxxxxxxxxxxxx";
    body["expires_at"] = rfc3339(clock_.now() + 1h);
    test::TokenResponse out{201, json::serialize(body)};
    out.delay = delay;
    return out;
  }

  ManualClock& clock_;
  std::atomic<int> minted_{0};
  test::FakeTokenServer server_;
};

CredentialSpec github_spec(const std::string& key_file, const test::FakeTokenServer& server) {
  CredentialSpec spec;
  spec.name = "github";
  spec.kind = ProviderKind::github_app;
  spec.app_id = 12345;
  spec.private_key_file = key_file;
  spec.installation_id = 678;
  spec.api_url = server.url();
  spec.ca_file = server.ca_file();
  spec.permissions = {{"contents", "write"}, {"metadata", "read"}};
  spec.timeout = 3s;
  return spec;
}

Scope widgets_scope() {
  Scope s;
  s.repositories = {"acme/widgets"};
  s.permissions = {{"contents", "read"}};
  s.normalize();
  return s;
}

class GithubAppStore : public ::testing::Test {
 protected:
  GithubAppStore() : key_(dir_), github_(clock_), store_(options()) {
    store_.update({github_spec(key_.path, github_.server())});
  }

  StoreOptions options() {
    StoreOptions o;
    o.clock = clock_.fn();
    o.backoff = {1'000ms, 300'000ms};
    o.random = [] { return 0.0; };
    o.log = [this](std::string_view line) {
      const std::lock_guard lock(log_mutex_);
      log_.emplace_back(line);
    };
    return o;
  }
  std::vector<std::string> log_lines() {
    const std::lock_guard lock(log_mutex_);
    return log_;
  }
  // Whatever a test did, no log line holds a minted token or the app's JWT.
  void TearDown() override {
    for (const std::string& line : log_lines()) {
      EXPECT_EQ(line.find("ghs_minted"), std::string::npos) << line;
      EXPECT_EQ(line.find("eyJ"), std::string::npos) << line;  // base64url of '{"'
    }
  }

  test::TempDir dir_;
  AppKey key_;
  ManualClock clock_;
  FakeGithub github_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
  CredentialStore store_;
};

TEST_F(GithubAppStore, MintsWithASignedJwtAndTheRuleScope) {
  const TimePoint t0 = clock_.now();
  const TokenResult r = get(store_, "github", widgets_scope());
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), "ghs_minted1xxxxxxxxxxxxxxxxxxxx");
  EXPECT_EQ(r.token->fingerprint, fingerprint("ghs_minted1xxxxxxxxxxxxxxxxxxxx"));
  EXPECT_EQ(r.token->fingerprint.size(), 12u);
  EXPECT_EQ(r.token->expires_at, t0 + 1h);
  EXPECT_EQ(r.token->refresh_at, t0 + 50min);

  const auto requests = github_.server().requests();
  ASSERT_EQ(requests.size(), 1u);
  const test::TokenRequest& req = requests[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/app/installations/678/access_tokens");
  EXPECT_EQ(req.headers.at("accept"), "application/vnd.github+json");
  EXPECT_EQ(req.headers.at("x-github-api-version"), "2022-11-28");
  EXPECT_TRUE(req.headers.at("user-agent").starts_with("sandgate/"));
  const std::string& auth = req.headers.at("authorization");
  ASSERT_TRUE(auth.starts_with("Bearer "));
  const json::value claims = key_.verify(std::string_view(auth).substr(7));
  ASSERT_TRUE(claims.is_object()) << "the JWT's signature does not verify with the app's key";
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(t0.time_since_epoch()).count();
  EXPECT_EQ(claims.at("iat").as_int64(), now - 60);
  EXPECT_LE(claims.at("exp").as_int64(), now + 600);
  EXPECT_GT(claims.at("exp").as_int64(), now);
  EXPECT_EQ(claims.at("iss").as_int64(), 12345);
  EXPECT_EQ(json::parse(req.body), json::parse(R"({"repositories":["widgets"],
                                                  "permissions":{"contents":"read"}})"));
}

TEST_F(GithubAppStore, CachesPerScopeAndUsesTheCredentialsPermissionsByDefault) {
  ASSERT_TRUE(get(store_, "github", widgets_scope()).ok());
  const TokenResult again = get(store_, "github", widgets_scope());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(github_.server().request_count(), 1u);  // cached

  // Two sandboxes with different repository scopes get different tokens.
  const TokenResult whole = get(store_, "github", Scope{});
  ASSERT_TRUE(whole.ok());
  EXPECT_NE(whole.token->value.view(), again.token->value.view());
  ASSERT_EQ(github_.server().request_count(), 2u);
  EXPECT_EQ(json::parse(github_.server().requests()[1].body),
            json::parse(R"({"permissions":{"contents":"write","metadata":"read"}})"));
  EXPECT_EQ(store_.slot_count(), 2u);
}

TEST_F(GithubAppStore, RefreshesAheadOfExpiryWhileServingTheCachedToken) {
  const TokenResult first = get(store_, "github");
  ASSERT_TRUE(first.ok());
  clock_.advance(49min);
  EXPECT_EQ(get(store_, "github").token, first.token);
  EXPECT_EQ(github_.server().request_count(), 1u);
  clock_.advance(2min);  // past refresh_at (50 min), before expiry
  const TokenResult ahead = get(store_, "github");
  EXPECT_EQ(ahead.token, first.token);  // served at once, refresh in the background
  ASSERT_TRUE(test::eventually([&] { return get(store_, "github").token != first.token; }));
  EXPECT_EQ(github_.server().request_count(), 2u);
  EXPECT_EQ(get(store_, "github").token->value.view(), "ghs_minted2xxxxxxxxxxxxxxxxxxxx");
}

TEST_F(GithubAppStore, EndpointDownServesTheCachedTokenUntilExpiryThenRetryableError) {
  const TokenResult first = get(store_, "github");
  ASSERT_TRUE(first.ok());
  github_.server().stop();
  clock_.advance(55min);
  EXPECT_EQ(get(store_, "github").token, first.token);
  ASSERT_TRUE(test::eventually([&] { return store_.stats()[0].failures == 1; }));
  EXPECT_EQ(get(store_, "github").token, first.token);  // still served, in backoff

  clock_.advance(5min);  // expired now
  const TokenResult down = get(store_, "github");
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.error->retryable);
  EXPECT_NE(down.error->message.find("cannot connect"), std::string::npos) << down.error->message;
  EXPECT_EQ(down.error->message.find("ghs_"), std::string::npos);
  // In backoff (1 s after the second failure): answered at once, no new attempt.
  const auto failures = store_.stats()[0].failures;
  const TokenResult fast = get(store_, "github");
  ASSERT_FALSE(fast.ok());
  EXPECT_TRUE(fast.error->retryable);
  EXPECT_EQ(store_.stats()[0].failures, failures);
  EXPECT_FALSE(log_lines().empty());
}

TEST_F(GithubAppStore, UnauthorizedIsNotRetryableAndQuotesNoSecret) {
  std::string jwt_seen;
  github_.override = [&](const test::TokenRequest& r) {
    jwt_seen = r.headers.at("authorization").substr(7);
    return test::TokenResponse{401, R"({"message":"A JSON web token could not be decoded",)"
                                    R"("echo":")" +
                                        jwt_seen + R"("})"};
  };
  const TokenResult r = get(store_, "github");
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
  EXPECT_NE(r.error->message.find("HTTP 401"), std::string::npos) << r.error->message;
  EXPECT_NE(r.error->message.find("could not be decoded"), std::string::npos);
  ASSERT_FALSE(jwt_seen.empty());
  EXPECT_EQ(r.error->message.find(jwt_seen.substr(0, 40)), std::string::npos);
  for (const auto& line : log_lines())
    EXPECT_EQ(line.find(jwt_seen.substr(0, 40)), std::string::npos);
}

TEST_F(GithubAppStore, ServerErrorIsRetryable) {
  github_.override = [](const test::TokenRequest&) {
    return test::TokenResponse{502, "bad gateway"};
  };
  const TokenResult r = get(store_, "github");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->retryable);
  EXPECT_NE(r.error->message.find("HTTP 502: bad gateway"), std::string::npos);
}

TEST_F(GithubAppStore, ConcurrentFirstRequestsFromTwoThreadsMintOnce) {
  github_.delay = 300ms;
  constexpr int kPerThread = 50;
  std::atomic<int> ok{0};
  std::mutex mutex;
  std::set<const Token*> seen;
  const Scope scope = widgets_scope();  // get() takes it by reference: it must outlive the call
  const auto run = [&] {
    asio::io_context io;
    for (int i = 0; i < kPerThread; ++i) {
      asio::co_spawn(io, store_.get("github", scope, 5s), [&](std::exception_ptr, TokenResult r) {
        if (!r.ok()) return;
        ++ok;
        const std::lock_guard lock(mutex);
        seen.insert(r.token.get());
      });
    }
    io.run();
  };
  std::thread a(run);
  std::thread b(run);
  a.join();
  b.join();
  EXPECT_EQ(ok.load(), 2 * kPerThread);
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(github_.server().request_count(), 1u);
  EXPECT_EQ(store_.stats()[0].refreshes, 1u);
}

TEST_F(GithubAppStore, WaitIsBoundedByMaxWait) {
  github_.delay = 2s;
  const TokenResult r = get(store_, "github", {}, 100ms);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->retryable);
  EXPECT_NE(r.error->message.find("within 100 ms"), std::string::npos);
}

TEST_F(GithubAppStore, LooksUpTheInstallationOfAnAccount) {
  CredentialSpec spec = github_spec(key_.path, github_.server());
  spec.installation_id = 0;
  spec.installation_account = "acme";
  store_.update({spec});
  ASSERT_TRUE(get(store_, "github").ok());
  const auto requests = github_.server().requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].target, "/orgs/acme/installation");
  EXPECT_EQ(requests[1].target, "/users/acme/installation");
  EXPECT_TRUE(
      key_.verify(std::string_view(requests[1].headers.at("authorization")).substr(7)).is_object());
  EXPECT_EQ(requests[2].target, "/app/installations/99/access_tokens");
}

TEST_F(GithubAppStore, UnreadableKeyIsNotRetryable) {
  ::chmod(key_.path.c_str(), 0644);
  const TokenResult r = get(store_, "github");
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
  EXPECT_NE(r.error->message.find("accessible by group or others"), std::string::npos);
  EXPECT_EQ(github_.server().request_count(), 0u);
}

TEST_F(GithubAppStore, UpdateKeepsTokensOfUnchangedSpecsAndDropsChangedOnes) {
  const TokenResult first = get(store_, "github");
  store_.update({github_spec(key_.path, github_.server())});
  EXPECT_EQ(get(store_, "github").token, first.token);
  CredentialSpec changed = github_spec(key_.path, github_.server());
  changed.permissions = {{"contents", "read"}};
  store_.update({changed});
  EXPECT_NE(get(store_, "github").token, first.token);
  EXPECT_EQ(github_.server().request_count(), 2u);
  store_.update({});
  const TokenResult gone = get(store_, "github");
  ASSERT_FALSE(gone.ok());
  EXPECT_FALSE(gone.error->retryable);
}

TEST_F(GithubAppStore, StatsShowRefreshesFailuresAndSecondsToExpiry) {
  ASSERT_TRUE(get(store_, "github").ok());
  clock_.advance(10min);
  const auto stats = store_.stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].name, "github");
  EXPECT_EQ(stats[0].kind, ProviderKind::github_app);
  EXPECT_EQ(stats[0].refreshes, 1u);
  EXPECT_EQ(stats[0].failures, 0u);
  ASSERT_TRUE(stats[0].seconds_to_expiry);
  EXPECT_DOUBLE_EQ(*stats[0].seconds_to_expiry, 50 * 60);
  EXPECT_EQ(stats[0].cache_entries, 1u);
  ASSERT_TRUE(get(store_, "github", widgets_scope()).ok());  // a second scope, a second entry
  EXPECT_EQ(store_.stats()[0].cache_entries, 2u);
}

// Scopes come and go (a role session per sandbox): an entry whose token ran out unasked goes
// when a new scope comes, so the cache holds the scopes in use, not every one ever seen. One
// still in use stays; so does one in a failure's backoff (its backoff would be lost).
TEST_F(GithubAppStore, EntriesNobodyAskedForSinceTheyExpiredGoWhenANewScopeComes) {
  const auto scope_of = [](std::string sandbox) {
    Scope scope;
    scope.sandbox = std::move(sandbox);
    return scope;
  };
  for (const char* sandbox : {"sb-1", "sb-2", "sb-3"}) {
    ASSERT_TRUE(get(store_, "github", scope_of(sandbox)).ok());
  }
  EXPECT_EQ(store_.stats()[0].cache_entries, 3u);
  clock_.advance(59min);
  ASSERT_TRUE(get(store_, "github", scope_of("sb-3")).ok());  // refreshed: still in use
  ASSERT_TRUE(test::eventually([&] { return github_.server().request_count() == 4u; }));
  clock_.advance(2min);  // sb-1's and sb-2's tokens ran out unasked
  ASSERT_TRUE(get(store_, "github", scope_of("sb-4")).ok());
  EXPECT_EQ(store_.stats()[0].cache_entries, 2u);  // sb-3's and sb-4's
  EXPECT_NE(store_.cached("github", scope_of("sb-3")), nullptr);
  // sb-1 again: a new entry, a new token.
  ASSERT_TRUE(get(store_, "github", scope_of("sb-1")).ok());
  EXPECT_EQ(github_.server().request_count(), 6u);
  EXPECT_EQ(store_.stats()[0].cache_entries, 3u);
}

TEST_F(GithubAppStore, CachedReturnsOnlyAUsableTokenAndNeverWaits) {
  EXPECT_EQ(store_.cached("github", Scope{}), nullptr);  // nothing yet: get() has to wait
  EXPECT_EQ(github_.server().request_count(), 0u);       // and cached() started no mint
  const TokenResult r = get(store_, "github");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(store_.cached("github", Scope{}), r.token);
  EXPECT_EQ(store_.cached("github", widgets_scope()), nullptr);
  clock_.advance(1h);  // expired
  EXPECT_EQ(store_.cached("github", Scope{}), nullptr);
  EXPECT_EQ(store_.cached("nope", Scope{}), nullptr);
}

TEST(CredentialStore, UnknownCredentialIsNotRetryable) {
  CredentialStore store;
  const TokenResult r = get(store, "nope");
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
}

// ---------------------------------------------------------------------------------------------
// exec

class ExecStore : public ::testing::Test {
 protected:
  ExecStore() {
    StoreOptions o;
    o.clock = clock_.fn();
    o.random = [] { return 0.0; };
    o.log = [this](std::string_view line) {
      const std::lock_guard lock(mutex_);
      log_.emplace_back(line);
    };
    store_ = std::make_unique<CredentialStore>(std::move(o));
  }

  void use_script(const std::string& body, std::chrono::milliseconds timeout = 5s) {
    const std::string path =
        dir_.write("helper-" + std::to_string(++scripts_) + ".sh", "#!/bin/sh\n" + body);
    ::chmod(path.c_str(), 0700);
    CredentialSpec spec;
    spec.name = "vault";
    spec.kind = ProviderKind::exec;
    spec.command = {path, "--scope", "x y"};
    spec.timeout = timeout;
    spec.ttl = 300s;
    store_->update({spec});
  }
  std::string log_text() {
    const std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& l : log_) out += l + "\n";
    return out;
  }

  test::TempDir dir_;
  ManualClock clock_;
  int scripts_ = 0;
  std::mutex mutex_;
  std::vector<std::string> log_;
  std::unique_ptr<CredentialStore> store_;
};

TEST_F(ExecStore, ReadsTheTokenAndExpiryAndRedactsItFromStderr) {
  const std::string expires = rfc3339(clock_.now() + 2h);
  use_script(
      "[ \"$1|$2\" = \"--scope|x y\" ] || exit 9\n"
      "echo 'using vlt_SECRET123456 now' >&2\n"
      "printf '{\"token\": \"vlt_SECRET123456\", \"expires_at\": \"" +
      expires + "\"}'\n");
  const TokenResult r = get(*store_, "vault");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), "vlt_SECRET123456");
  EXPECT_EQ(r.token->expires_at, clock_.now() + 2h);
  const std::string log = log_text();
  EXPECT_NE(log.find("using **************** now"), std::string::npos) << log;
  EXPECT_EQ(log.find("SECRET123456"), std::string::npos) << log;
}

TEST_F(ExecStore, WithoutExpiryTheTokenLivesTtl) {
  use_script("echo '{\"token\": \"t0k3n-abc\"}'\n");
  const TokenResult r = get(*store_, "vault");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->expires_at, clock_.now() + 300s);
}

TEST_F(ExecStore, TimeoutKillsTheHelperAndIsRetryable) {
  use_script("sleep 30\n", 300ms);
  const TokenResult r = get(*store_, "vault");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->retryable);
  EXPECT_NE(r.error->message.find("timed out after 300 ms"), std::string::npos) << r.error->message;
}

TEST_F(ExecStore, BadJsonIsNotRetryableAndNotQuoted) {
  use_script("echo 'token: raw_SECRET_abcdef'\necho 'cannot parse raw_SECRET_abcdef' >&2\n");
  const TokenResult r = get(*store_, "vault");
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.error->retryable);
  EXPECT_NE(r.error->message.find("expected a JSON object"), std::string::npos);
  EXPECT_EQ(r.error->message.find("raw_SECRET"), std::string::npos);
  const std::string log = log_text();
  EXPECT_NE(log.find("cannot parse"), std::string::npos) << log;
  EXPECT_EQ(log.find("raw_SECRET"), std::string::npos) << log;
}

TEST_F(ExecStore, NonZeroExitIsRetryableAndItsStderrLoggedBounded) {
  use_script(
      "i=0; while [ $i -lt 500 ]; do echo 'vault sealed, try later' >&2; i=$((i+1)); done\n"
      "exit 3\n");
  const TokenResult r = get(*store_, "vault");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->retryable);
  EXPECT_NE(r.error->message.find("exited with status 3"), std::string::npos);
  const std::string log = log_text();
  EXPECT_NE(log.find("vault sealed"), std::string::npos);
  EXPECT_NE(log.find("[truncated]"), std::string::npos);
  EXPECT_LT(log.size(), 4096u);
}

// The daemon holds every sandbox's connections and its listeners, and Asio opens them without
// O_CLOEXEC. A helper that inherited them could answer on a listener or keep a connection open
// after the daemon closed it (a helper that leaves a process behind, as credential caches do).
TEST_F(ExecStore, TheHelperInheritsNoDescriptorOfTheDaemon) {
  asio::io_context io;
  asio::ip::tcp::acceptor listener(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket client(io);
  client.connect(listener.local_endpoint());
  asio::ip::tcp::socket accepted = listener.accept();
  // Compared by what the descriptor is, not its number: the shell keeps its script open on a
  // descriptor of its own (dash: 10 or above), which may be the number a socket had here.
  std::vector<std::string> sockets;
  for (const int fd :
       {listener.native_handle(), client.native_handle(), accepted.native_handle()}) {
    ASSERT_EQ(::fcntl(fd, F_SETFD, 0), 0);  // inheritable, as Asio (1.81) opens them
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    sockets.push_back("socket:[" + std::to_string(st.st_ino) + "]");
  }
  use_script(
      "for f in /proc/$$/fd/*; do readlink \"$f\"; done | tr '\\n' ' ' >&2\n"
      "echo '{\"token\": \"t0k3n-abc\"}'\n");
  const TokenResult r = get(*store_, "vault");
  ASSERT_TRUE(r.ok()) << r.error->message;
  const std::string log = log_text();
  EXPECT_NE(log.find("/dev/null"), std::string::npos) << log;  // the listing was made
  for (const std::string& socket : sockets) EXPECT_EQ(log.find(socket), std::string::npos) << log;
}

// ---------------------------------------------------------------------------------------------
// static

TEST(StaticStore, ReadsTheFileAndReadsItAgainWhenItChanges) {
  test::TempDir dir;
  const std::string path = dir.write("npm-token", "npm_first\n");
  ::chmod(path.c_str(), 0600);
  ManualClock clock;
  StoreOptions o;
  o.clock = clock.fn();
  CredentialStore store(std::move(o));
  CredentialSpec spec;
  spec.name = "npm";
  spec.kind = ProviderKind::static_file;
  spec.file = path;
  store.update({spec});
  const TokenResult first = get(store, "npm");
  ASSERT_TRUE(first.ok()) << first.error->message;
  EXPECT_EQ(first.token->value.view(), "npm_first");
  EXPECT_EQ(first.token->expires_at, TimePoint::max());
  EXPECT_FALSE(store.stats()[0].seconds_to_expiry);

  dir.write("npm-token", "npm_second");
  EXPECT_EQ(get(store, "npm").token->value.view(), "npm_first");  // checked at most every 2 s
  clock.advance(3s);
  ASSERT_TRUE(
      test::eventually([&] { return get(store, "npm").token->value.view() == "npm_second"; }));

  ::chmod(path.c_str(), 0644);
  CredentialSpec other = spec;
  other.name = "npm2";
  store.update({spec, other});
  const TokenResult open = get(store, "npm2");
  ASSERT_FALSE(open.ok());
  EXPECT_FALSE(open.error->retryable);
  EXPECT_NE(open.error->message.find("chmod 600"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// oauth2_client_credentials

TEST(OAuth2Store, PostsTheFormWithBasicClientAuth) {
  test::TempDir dir;
  const std::string secret = dir.write("secret", "s3cr/et\n");
  ::chmod(secret.c_str(), 0600);
  test::FakeTokenServer server([](const test::TokenRequest& r) {
    if (r.target != "/oauth/token") return test::TokenResponse{404, "{}"};
    return test::TokenResponse{
        200, R"({"access_token":"oa_token_1","token_type":"Bearer","expires_in":3600})"};
  });
  ManualClock clock;
  StoreOptions o;
  o.clock = clock.fn();
  CredentialStore store(std::move(o));
  CredentialSpec spec;
  spec.name = "api";
  spec.kind = ProviderKind::oauth2_client_credentials;
  spec.token_url = server.url() + "/oauth/token";
  spec.client_id = "sand gate";
  spec.client_secret_file = secret;
  spec.scopes = {"read", "write"};
  spec.audience = "https://api.example.com";
  spec.ca_file = server.ca_file();
  store.update({spec});
  const TokenResult r = get(store, "api");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), "oa_token_1");
  EXPECT_EQ(r.token->expires_at, clock.now() + 3600s);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].headers.at("content-type"), "application/x-www-form-urlencoded");
  EXPECT_EQ(requests[0].headers.at("authorization"), "Basic " + base64("sand%20gate:s3cr%2Fet"));
  EXPECT_EQ(requests[0].body,
            "grant_type=client_credentials&scope=read%20write&audience=https%3A%2F%2Fapi.example."
            "com");

  server.set_handler([](const test::TokenRequest&) {
    return test::TokenResponse{400, R"({"error":"invalid_client"})"};
  });
  spec.client_id = "other";
  store.update({spec});
  const TokenResult bad = get(store, "api");
  ASSERT_FALSE(bad.ok());
  EXPECT_FALSE(bad.error->retryable);
  EXPECT_NE(bad.error->message.find("invalid_client"), std::string::npos);
  EXPECT_EQ(bad.error->message.find("s3cr"), std::string::npos);
  // For the audit line: the status and the code, nothing else.
  EXPECT_EQ(bad.error->endpoint_status, 400U);
  EXPECT_EQ(bad.error->endpoint_error, "invalid_client");
}

// ---------------------------------------------------------------------------------------------
// oauth2_jwt_bearer (RFC 7523): a Google service-account key's assertion, checked by the
// endpoint with the key's public half; a PEM key that names no issuer; the endpoint's refusal.

TEST(JwtBearerStore, AServiceAccountKeyIsExchangedForAnAccessToken) {
  test::TempDir dir;
  const test::AppKey key(dir);
  std::string pem;
  {
    std::ifstream in(key.path);
    pem.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string assertion_seen;
  test::FakeTokenServer server([&](const test::TokenRequest& r) {
    const std::string prefix =
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
    if (r.target != "/token" || r.body.rfind(prefix, 0) != 0) {
      return test::TokenResponse{400, R"({"error":"unsupported_grant_type"})"};
    }
    assertion_seen = r.body.substr(prefix.size());
    const boost::json::value claims = key.verify(assertion_seen);
    if (!claims.is_object()) return test::TokenResponse{400, R"({"error":"invalid_grant"})"};
    return test::TokenResponse{200, R"({"access_token":"ya29.sandgate","expires_in":3599,)"
                                    R"("token_type":"Bearer"})"};
  });
  boost::json::object sa{{"type", "service_account"},
                         {"private_key_id", "kid-1"},
                         {"private_key", pem},
                         {"client_email", "agents@proj.iam.gserviceaccount.com"},
                         {"token_uri", server.url() + "/token"}};
  const std::string sa_file = dir.write("sa.json", boost::json::serialize(sa));
  ::chmod(sa_file.c_str(), 0600);
  ManualClock clock;
  StoreOptions o;
  o.clock = clock.fn();
  CredentialStore store(std::move(o));
  CredentialSpec spec;
  spec.name = "gcp";
  spec.kind = ProviderKind::oauth2_jwt_bearer;
  spec.key_file = sa_file;
  spec.scopes = {"https://www.googleapis.com/auth/cloud-platform", "openid"};
  spec.ca_file = server.ca_file();
  store.update({spec});
  const TokenResult r = get(store, "gcp");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), "ya29.sandgate");
  EXPECT_EQ(r.token->expires_at, clock.now() + 3599s);
  // The assertion: the key's issuer and key id, the endpoint as audience, the scopes.
  const boost::json::value claims = key.verify(assertion_seen);
  ASSERT_TRUE(claims.is_object());
  const auto& c = claims.as_object();
  EXPECT_EQ(c.at("iss"), "agents@proj.iam.gserviceaccount.com");
  EXPECT_EQ(c.at("aud"), boost::json::value(server.url() + "/token"));
  EXPECT_EQ(c.at("scope"), "https://www.googleapis.com/auth/cloud-platform openid");
  EXPECT_EQ(c.at("exp").as_int64() - c.at("iat").as_int64(), 3600);
  EXPECT_FALSE(c.contains("sub"));
  const auto dot = assertion_seen.find('.');
  EXPECT_EQ(boost::json::parse(test::base64url_decode(assertion_seen.substr(0, dot))),
            boost::json::parse(R"({"alg":"RS256","typ":"JWT","kid":"kid-1"})"));

  // A PEM key alone names no issuer: told, not retried.
  spec.name = "pem";
  spec.key_file = key.path;
  store.update({spec});
  const TokenResult pem_only = get(store, "pem");
  ASSERT_FALSE(pem_only.ok());
  EXPECT_FALSE(pem_only.error->retryable);
  EXPECT_NE(pem_only.error->message.find("set issuer and token_url"), std::string::npos);
  // With them, and a subject to act for: the endpoint refuses (invalid_grant), not retried.
  spec.issuer = "sandgate@example.com";
  spec.subject = "agent@example.com";
  spec.token_url = server.url() + "/other";
  store.update({spec});
  const TokenResult refused = get(store, "pem");
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error->retryable);
  EXPECT_EQ(refused.error->endpoint_status, 400U);
  EXPECT_EQ(refused.error->endpoint_error, "unsupported_grant_type");
  EXPECT_EQ(refused.error->message.find(pem.substr(40, 20)), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// vault: a stand-in for Vault's HTTP API that refuses what Vault refuses: a wrong, missing,
// expired or revoked token, a wrong secret id, a namespace it does not have (403
// {"errors":["permission denied"]}); a path it does not have (404 {"errors":[]}); renewing a lease
// it does not know, or one that has ended or been revoked (400 {"errors":["lease not found"]}),
// or a token that is not renewable (400 {"errors":["lease is not renewable"]}). Tokens and leases
// live on the test's clock, and a renewal grants the increment asked but never past the max TTL.

class VaultStandIn {
 public:
  // Login tokens: 1 h, at most 2 h. Database leases: 15 min, at most 45 min.
  static constexpr std::int64_t kTokenTtl = 3600, kTokenMaxTtl = 7200;
  static constexpr std::int64_t kLeaseTtl = 900, kLeaseMaxTtl = 2700;

  explicit VaultStandIn(ManualClock& clock)
      : clock_(clock), server_([this](const test::TokenRequest& r) { return serve(r); }) {
    tokens_["hvs.root"] = Grant{};  // a root token: never expires, not renewable
  }
  const test::FakeTokenServer& server() const { return server_; }
  test::FakeTokenServer& server() { return server_; }

  int logins() const { return count("login"); }
  int reads(const std::string& path) const { return count("GET /v1/" + path); }
  int count(const std::string& what) const {
    const std::lock_guard lock(mutex_);
    const auto it = counts_.find(what);
    return it == counts_.end() ? 0 : it->second;
  }
  // A token as an operator made it (for token_file).
  void add_token(const std::string& token, std::int64_t ttl, bool renewable) {
    const std::lock_guard lock(mutex_);
    tokens_[token] = grant(ttl, ttl * 2, renewable);
  }
  void revoke_token(const std::string& token) {
    const std::lock_guard lock(mutex_);
    tokens_.erase(token);
  }
  void revoke_leases() {
    const std::lock_guard lock(mutex_);
    leases_.clear();
  }
  TimePoint token_expiry(const std::string& token) const {
    const std::lock_guard lock(mutex_);
    const auto it = tokens_.find(token);
    return it == tokens_.end() ? TimePoint{} : it->second.expires;
  }

 private:
  struct Grant {
    TimePoint expires = TimePoint::max();  // max: never (a root token)
    TimePoint max_end = TimePoint::max();
    std::int64_t ttl = 0;  // granted at first, and by a renewal that asks for no increment
    bool renewable = false;
  };

  Grant grant(std::int64_t ttl, std::int64_t max_ttl, bool renewable) const {
    const TimePoint now = clock_.now();
    return Grant{now + std::chrono::seconds(ttl), now + std::chrono::seconds(max_ttl), ttl,
                 renewable};
  }
  bool live(const std::map<std::string, Grant>& grants, const std::string& id) const {
    const auto it = grants.find(id);
    return it != grants.end() && clock_.now() < it->second.expires;
  }
  // Vault's renewal: the increment asked (none: the first TTL again), cut at the max TTL.
  std::int64_t renew(Grant& g, const boost::json::value& increment) const {
    const TimePoint now = clock_.now();
    const std::int64_t asked =
        increment.is_int64() && increment.as_int64() > 0 ? increment.as_int64() : g.ttl;
    const std::int64_t left =
        std::chrono::duration_cast<std::chrono::seconds>(g.max_end - now).count();
    const std::int64_t ttl = std::min(asked, left);
    g.expires = now + std::chrono::seconds(ttl);
    return ttl;
  }

  test::TokenResponse serve(const test::TokenRequest& r) {
    const std::lock_guard lock(mutex_);
    const test::TokenResponse denied{403, R"({"errors":["permission denied"]})"};
    const test::TokenResponse not_renewable{400, R"({"errors":["lease is not renewable"]})"};
    const auto header = [&](const std::string& name) {
      const auto it = r.headers.find(name);
      return it == r.headers.end() ? std::string() : it->second;
    };
    if (header("x-vault-namespace") != "team-a") return denied;
    boost::system::error_code ec;
    const boost::json::value body = boost::json::parse(r.body, ec);
    const auto field = [&](const char* name) {
      return !ec && body.is_object() && body.as_object().contains(name) ? body.at(name)
                                                                        : boost::json::value();
    };
    if (r.method == "POST" &&
        (r.target == "/v1/auth/approle/login" || r.target == "/v1/auth/k8s-prod/login")) {
      const bool ok = r.target == "/v1/auth/approle/login"
                          ? field("role_id") == "sandgate-role" && field("secret_id") == "s3cret-id"
                          : field("role") == "agents" && field("jwt") == "eyJk8s.jwt";
      if (!ok) return test::TokenResponse{400, R"({"errors":["invalid role or secret ID"]})"};
      const std::string token = "hvs.login" + std::to_string(++counts_["login"]);
      tokens_[token] = grant(kTokenTtl, kTokenMaxTtl, true);
      return test::TokenResponse{200, R"({"auth":{"client_token":")" + token +
                                          R"(","lease_duration":3600,"renewable":true}})"};
    }
    const std::string token = header("x-vault-token");
    if (!live(tokens_, token)) return denied;
    ++counts_[r.method + " " + r.target];
    Grant& self = tokens_[token];
    if (r.method == "GET" && r.target == "/v1/auth/token/lookup-self") {
      const std::int64_t ttl =
          self.expires == TimePoint::max()
              ? 0
              : std::chrono::duration_cast<std::chrono::seconds>(self.expires - clock_.now())
                    .count();
      boost::json::object data{
          {"ttl", ttl}, {"creation_ttl", self.ttl}, {"renewable", self.renewable}};
      return test::TokenResponse{200, boost::json::serialize(boost::json::object{{"data", data}})};
    }
    if ((r.method == "POST" || r.method == "PUT") && r.target == "/v1/auth/token/renew-self") {
      if (!self.renewable) return not_renewable;
      const std::int64_t ttl = renew(self, field("increment"));
      boost::json::object auth{
          {"client_token", token}, {"lease_duration", ttl}, {"renewable", true}};
      return test::TokenResponse{200, boost::json::serialize(boost::json::object{{"auth", auth}})};
    }
    if ((r.method == "POST" || r.method == "PUT") && r.target == "/v1/sys/leases/renew") {
      const boost::json::value id = field("lease_id");
      if (!id.is_string() || !live(leases_, std::string(id.as_string()))) {
        return test::TokenResponse{400, R"({"errors":["lease not found"]})"};
      }
      Grant& lease = leases_[std::string(id.as_string())];
      if (!lease.renewable) return not_renewable;
      const std::int64_t ttl = renew(lease, field("increment"));
      boost::json::object answer{
          {"lease_id", id}, {"renewable", true}, {"lease_duration", ttl}, {"data", nullptr}};
      return test::TokenResponse{200, boost::json::serialize(answer)};
    }
    if (r.method == "GET" && r.target == "/v1/secret/data/agents/api") {
      return test::TokenResponse{200,
                                 R"({"data":{"data":{"token":"api-token-from-vault","user":"svc"},)"
                                 R"("metadata":{"version":3}},"lease_duration":0})"};
    }
    // Dynamic secrets: a new password and lease on every read; the STS-like one not renewable.
    const bool database = r.target == "/v1/database/creds/readonly";
    if (r.method == "GET" && (database || r.target == "/v1/aws/sts/deploy")) {
      const std::string n = std::to_string(counts_["GET " + r.target]);
      const std::string id = r.target.substr(4) + "/" + n;
      leases_[id] = grant(kLeaseTtl, kLeaseMaxTtl, database);
      boost::json::object answer{{"lease_id", id},
                                 {"lease_duration", kLeaseTtl},
                                 {"renewable", database},
                                 {"data", {{"username", "v-ro"}, {"password", "dyn-pass-" + n}}}};
      return test::TokenResponse{200, boost::json::serialize(answer)};
    }
    return test::TokenResponse{404, R"({"errors":[]})"};
  }

  ManualClock& clock_;
  mutable std::mutex mutex_;
  // "login", and "METHOD /v1/PATH" of each request with a live token.
  std::map<std::string, int> counts_;
  std::map<std::string, Grant> tokens_;
  std::map<std::string, Grant> leases_;
  test::FakeTokenServer server_;  // last: stopped first, before what its handler uses
};

TEST(VaultStore, ReadsKvAndDynamicSecretsAfterEachLoginMethod) {
  test::TempDir dir;
  const auto secret_file = [&](const std::string& name, const std::string& value) {
    const std::string path = dir.write(name, value + "\n");
    ::chmod(path.c_str(), 0600);
    return path;
  };
  ManualClock clock;
  VaultStandIn vault(clock);
  StoreOptions o;
  o.clock = clock.fn();
  CredentialStore store(std::move(o));
  CredentialSpec kv;
  kv.name = "kv";
  kv.kind = ProviderKind::vault;
  kv.address = vault.server().url();
  kv.ca_file = vault.server().ca_file();
  kv.vault_namespace = "team-a";
  kv.auth = "token";
  kv.token_file = secret_file("token", "hvs.root");
  kv.secret_path = "secret/data/agents/api";
  kv.field = "token";
  kv.ttl = std::chrono::minutes(10);
  CredentialSpec db = kv;  // a dynamic secret, after an AppRole login
  db.name = "db";
  db.auth = "approle";
  db.role_id = "sandgate-role";
  db.secret_id_file = secret_file("secret-id", "s3cret-id");
  db.secret_path = "database/creds/readonly";
  db.field = "password";
  CredentialSpec k8s = kv;  // Kubernetes auth at its own mount
  k8s.name = "k8s";
  k8s.auth = "kubernetes";
  k8s.auth_mount = "k8s-prod";
  k8s.role = "agents";
  k8s.jwt_file = secret_file("jwt", "eyJk8s.jwt");
  store.update({kv, db, k8s});

  const TokenResult a = get(store, "kv");
  ASSERT_TRUE(a.ok()) << a.error->message;
  EXPECT_EQ(a.token->value.view(), "api-token-from-vault");
  EXPECT_EQ(a.token->expires_at, TimePoint::max());  // KV: read again every ttl
  EXPECT_EQ(a.token->refresh_at, clock.now() + std::chrono::minutes(10));
  const TokenResult b = get(store, "db");
  ASSERT_TRUE(b.ok()) << b.error->message;
  EXPECT_EQ(b.token->value.view(), "dyn-pass-1");
  EXPECT_EQ(b.token->expires_at, clock.now() + 900s);  // the lease's end
  const TokenResult c = get(store, "k8s");
  ASSERT_TRUE(c.ok()) << c.error->message;
  EXPECT_EQ(c.token->value.view(), "api-token-from-vault");
  EXPECT_EQ(vault.logins(), 2);
  // The logins and reads as Vault saw them: the namespace on each, the login's own token.
  for (const auto& r : vault.server().requests())
    EXPECT_EQ(r.headers.at("x-vault-namespace"), "team-a");

  // Refusals: a wrong secret id (400), a path the token may not read (403), a missing path.
  db.name = "db-bad";
  db.secret_id_file = secret_file("bad-id", "wrong");
  CredentialSpec missing = kv;
  missing.name = "missing";
  missing.secret_path = "secret/data/nope";
  CredentialSpec other_ns = kv;
  other_ns.name = "other-ns";
  other_ns.vault_namespace = "team-b";
  store.update({kv, db, missing, other_ns});
  const TokenResult bad_login = get(store, "db-bad");
  ASSERT_FALSE(bad_login.ok());
  EXPECT_FALSE(bad_login.error->retryable);
  EXPECT_EQ(bad_login.error->endpoint_status, 400U);
  EXPECT_EQ(bad_login.error->endpoint_error, "invalid role or secret ID");
  EXPECT_EQ(bad_login.error->message.find("wrong"), std::string::npos);
  const TokenResult not_there = get(store, "missing");
  ASSERT_FALSE(not_there.ok());
  EXPECT_EQ(not_there.error->endpoint_status, 404U);
  const TokenResult denied = get(store, "other-ns");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error->endpoint_status, 403U);
  EXPECT_EQ(denied.error->endpoint_error, "permission denied");
  EXPECT_EQ(denied.error->message.find("hvs.root"), std::string::npos);

  // Vault down: worth retrying (no status, nothing from Vault); the KV token read before is
  // still served until it is read again.
  vault.server().stop();
  CredentialSpec down = kv;
  down.name = "down";
  store.update({kv, down});
  const TokenResult unreachable = get(store, "down");
  ASSERT_FALSE(unreachable.ok());
  EXPECT_TRUE(unreachable.error->retryable);
  EXPECT_EQ(unreachable.error->endpoint_status, 0U);
  const TokenResult cached = get(store, "kv");
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached.token->value.view(), "api-token-from-vault");
}

// Renewal: what each test needs (the clock, the stand-in, secret files, a store whose log is
// kept), and a check that nothing secret reaches a log line or an error.

void expect_nothing_secret(std::string_view text) {
  for (const std::string_view secret :
       {"hvs.", "dyn-pass", "s3cret-id", "api-token-from-vault", "eyJk8s"}) {
    EXPECT_EQ(text.find(secret), std::string_view::npos) << text;
  }
}

class VaultRig {
 public:
  VaultRig() : vault(clock), store(options()) {}
  ~VaultRig() {
    for (const std::string& line : log_lines()) expect_nothing_secret(line);
  }

  std::string secret_file(const std::string& name, const std::string& value) {
    const std::string path = dir.write(name, value + "\n");
    ::chmod(path.c_str(), 0600);
    return path;
  }
  // A credential reading `path` after an AppRole login, or with the token file NAME.token.
  CredentialSpec spec(const std::string& name, const std::string& auth, const std::string& path,
                      const std::string& field) {
    CredentialSpec out;
    out.name = name;
    out.kind = ProviderKind::vault;
    out.address = vault.server().url();
    out.ca_file = vault.server().ca_file();
    out.vault_namespace = "team-a";
    out.auth = auth;
    if (auth == "approle") {
      out.role_id = "sandgate-role";
      out.secret_id_file = secret_file("secret-id", "s3cret-id");
    } else {
      out.token_file = dir.file(name + ".token");
    }
    out.secret_path = path;
    out.field = field;
    out.ttl = std::chrono::minutes(10);
    return out;
  }
  std::vector<std::string> log_lines() {
    const std::lock_guard lock(log_mutex_);
    return log_;
  }
  CredentialStats stats(const std::string& name) const {
    for (CredentialStats s : store.stats()) {
      if (s.name == name) return s;
    }
    return {};
  }
  // Moves the clock by `d` and asks for `name`: a token due for refresh is served while the
  // store refreshes it in the background; this waits until that refresh is over (a fresh
  // token, or one more failure) and answers what a request gets then.
  TokenResult refresh(const std::string& name, WallClock::duration d) {
    clock.advance(d);
    const std::uint64_t failures = stats(name).failures;
    (void)get(store, name);
    EXPECT_TRUE(test::eventually([&] {
      const auto token = store.cached(name, Scope{});
      return is_fresh(token.get(), clock.now()) || stats(name).failures > failures;
    }));
    return get(store, name);
  }
  // The requests Vault got for `target` (method and path), in order.
  std::vector<test::TokenRequest> requests(const std::string& method, const std::string& target) {
    std::vector<test::TokenRequest> out;
    for (const auto& r : vault.server().requests()) {
      if (r.method == method && r.target == target) out.push_back(r);
    }
    return out;
  }

 private:
  StoreOptions options() {
    StoreOptions o;
    o.clock = clock.fn();
    o.log = [this](std::string_view line) {
      const std::lock_guard lock(log_mutex_);
      log_.emplace_back(line);
    };
    return o;
  }

 public:
  test::TempDir dir;
  ManualClock clock;
  VaultStandIn vault;

 private:
  std::mutex log_mutex_;
  std::vector<std::string> log_;

 public:
  CredentialStore store;  // last: its thread stops before the rest goes
};

TEST(VaultStore, RenewsALeaseBeforeItEndsAndReadsANewSecretWhenItCannot) {
  VaultRig rig;
  const CredentialSpec db = rig.spec("db", "approle", "database/creds/readonly", "password");
  const CredentialSpec sts = rig.spec("sts", "approle", "aws/sts/deploy", "password");
  rig.store.update({db, sts});
  const TimePoint start = rig.clock.now();
  const TokenResult first = get(rig.store, "db");
  ASSERT_TRUE(first.ok()) << first.error->message;
  EXPECT_EQ(first.token->value.view(), "dyn-pass-1");
  EXPECT_EQ(first.token->expires_at, start + 900s);

  // Due at 450 s (half its life, as refresh_before is 600 s): renewed for the 900 s the read
  // gave, the same password served until the new end; no new read, no new login.
  const TokenResult renewed = rig.refresh("db", 500s);
  ASSERT_TRUE(renewed.ok()) << renewed.error->message;
  EXPECT_EQ(renewed.token->value.view(), "dyn-pass-1");
  EXPECT_EQ(renewed.token->expires_at, start + 500s + 900s);
  EXPECT_EQ(rig.vault.reads("database/creds/readonly"), 1);
  EXPECT_EQ(rig.vault.count("PUT /v1/sys/leases/renew"), 1);
  EXPECT_EQ(rig.vault.logins(), 1);
  const auto renewals = rig.requests("PUT", "/v1/sys/leases/renew");
  ASSERT_EQ(renewals.size(), 1U);
  EXPECT_EQ(json::parse(renewals[0].body),
            json::parse(R"({"lease_id":"database/creds/readonly/1","increment":900})"));
  EXPECT_EQ(renewals[0].headers.at("x-vault-token"), "hvs.login1");

  // Renewed again at 1000 s and 1500 s, each time for 900 s (within the 2700 s max TTL)...
  for (const int n : {2, 3}) {
    const TokenResult again = rig.refresh("db", 500s);
    ASSERT_TRUE(again.ok()) << again.error->message;
    EXPECT_EQ(again.token->value.view(), "dyn-pass-1");
    EXPECT_EQ(again.token->expires_at, rig.clock.now() + 900s);
    EXPECT_EQ(rig.vault.count("PUT /v1/sys/leases/renew"), n);
  }
  // ...but at 2000 s only 700 s are left of it: Vault grants less than asked, so a new password
  // (a new lease) is read rather than one served until Vault revokes it.
  const TokenResult capped = rig.refresh("db", 500s);
  ASSERT_TRUE(capped.ok()) << capped.error->message;
  EXPECT_EQ(capped.token->value.view(), "dyn-pass-2");
  EXPECT_EQ(capped.token->expires_at, rig.clock.now() + 900s);
  EXPECT_EQ(rig.vault.count("PUT /v1/sys/leases/renew"), 4);
  EXPECT_EQ(rig.vault.reads("database/creds/readonly"), 2);

  // A lease Vault no longer has (revoked, or ended while Vault was away): "lease not found", a
  // new read.
  rig.vault.revoke_leases();
  const TokenResult revoked = rig.refresh("db", 500s);
  ASSERT_TRUE(revoked.ok()) << revoked.error->message;
  EXPECT_EQ(revoked.token->value.view(), "dyn-pass-3");
  EXPECT_EQ(rig.vault.reads("database/creds/readonly"), 3);
  const auto lines = rig.log_lines();
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("sys/leases/renew: HTTP 400: lease not found") != std::string::npos;
  }));

  // Control: a lease that is not renewable (STS-like credentials) is read again, not renewed.
  const TokenResult sts_first = get(rig.store, "sts");
  ASSERT_TRUE(sts_first.ok()) << sts_first.error->message;
  EXPECT_EQ(sts_first.token->value.view(), "dyn-pass-1");
  const TokenResult sts_again = rig.refresh("sts", 500s);
  ASSERT_TRUE(sts_again.ok()) << sts_again.error->message;
  EXPECT_EQ(sts_again.token->value.view(), "dyn-pass-2");
  EXPECT_EQ(rig.vault.count("PUT /v1/sys/leases/renew"), 5);  // db's five, none for sts
}

TEST(VaultStore, KeepsTheVaultTokenRenewsItAndLogsInAgainWhenItMust) {
  VaultRig rig;
  rig.store.update({rig.spec("kv", "approle", "secret/data/agents/api", "token")});
  const TimePoint start = rig.clock.now();
  const auto read_ok = [&](const TokenResult& r) {
    ASSERT_TRUE(r.ok()) << r.error->message;
    EXPECT_EQ(r.token->value.view(), "api-token-from-vault");
  };
  read_ok(get(rig.store, "kv"));
  EXPECT_EQ(rig.vault.logins(), 1);

  // Read again every ttl (10 min) with the token the login gave: no new login.
  read_ok(rig.refresh("kv", 11min));
  EXPECT_EQ(rig.vault.reads("secret/data/agents/api"), 2);
  EXPECT_EQ(rig.vault.logins(), 1);
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 0);

  // Past 3000 s (refresh_before its 3600 s end) it is renewed for 3600 s more, not replaced.
  read_ok(rig.refresh("kv", 3100s - 11min));
  EXPECT_EQ(rig.vault.logins(), 1);
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 1);
  EXPECT_EQ(rig.vault.token_expiry("hvs.login1"), start + 3100s + 3600s);
  const auto renewals = rig.requests("POST", "/v1/auth/token/renew-self");
  ASSERT_EQ(renewals.size(), 1U);
  EXPECT_EQ(json::parse(renewals[0].body), json::parse(R"({"increment":3600})"));

  // Revoked in Vault: the read with it is refused (403), so sandgate logs in once more and
  // reads again, and the request is served.
  rig.vault.revoke_token("hvs.login1");
  read_ok(rig.refresh("kv", 11min));
  EXPECT_EQ(rig.vault.logins(), 2);

  // Revoked just before its renewal is due: renew-self refused (403), a new login, the read.
  rig.vault.revoke_token("hvs.login2");
  read_ok(rig.refresh("kv", 3100s));
  EXPECT_EQ(rig.vault.logins(), 3);
  EXPECT_EQ(rig.requests("POST", "/v1/auth/token/renew-self").back().headers.at("x-vault-token"),
            "hvs.login2");

  // Renewed once more; then, near its 2 h max TTL, Vault renews it for less than asked: a new
  // login rather than a token that is about to end.
  read_ok(rig.refresh("kv", 3100s));
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 2);
  EXPECT_EQ(rig.vault.logins(), 3);
  read_ok(rig.refresh("kv", 3100s));
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 3);
  EXPECT_EQ(rig.vault.logins(), 4);
}

TEST(VaultStore, RenewsARenewableTokenFromItsFileAndPicksUpANewOne) {
  VaultRig rig;
  rig.vault.add_token("hvs.file1", 3600, true);
  const CredentialSpec kv = rig.spec("kv", "token", "secret/data/agents/api", "token");
  rig.secret_file("kv.token", "hvs.file1");
  rig.store.update({kv});
  const TimePoint start = rig.clock.now();
  ASSERT_TRUE(get(rig.store, "kv").ok());
  // Looked up once (its TTL, whether it is renewable), not on every read.
  ASSERT_TRUE(rig.refresh("kv", 11min).ok());
  EXPECT_EQ(rig.vault.count("GET /v1/auth/token/lookup-self"), 1);
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 0);
  // Due (refresh_before its end): renewed.
  ASSERT_TRUE(rig.refresh("kv", 3100s - 11min).ok());
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 1);
  EXPECT_EQ(rig.vault.token_expiry("hvs.file1"), start + 3100s + 3600s);

  // The file rewritten with another token: looked up, then used; this one is not renewable,
  // so it is never renewed.
  rig.vault.add_token("hvs.file2", 3600, false);
  rig.secret_file("kv.token", "hvs.file2");
  ASSERT_TRUE(rig.refresh("kv", 11min).ok());
  EXPECT_EQ(rig.vault.count("GET /v1/auth/token/lookup-self"), 2);
  EXPECT_EQ(rig.requests("GET", "/v1/secret/data/agents/api").back().headers.at("x-vault-token"),
            "hvs.file2");
  ASSERT_TRUE(rig.refresh("kv", 3100s).ok());
  EXPECT_EQ(rig.vault.count("POST /v1/auth/token/renew-self"), 1);
  EXPECT_EQ(rig.requests("POST", "/v1/auth/token/renew-self").size(), 1U);
}

TEST(VaultStore, VaultDownDuringARenewalIsRetriedWhileTheSecretIsServed) {
  VaultRig rig;
  rig.store.update({rig.spec("db", "approle", "database/creds/readonly", "password")});
  const TimePoint start = rig.clock.now();
  const TokenResult first = get(rig.store, "db");
  ASSERT_TRUE(first.ok()) << first.error->message;

  // The renewal cannot reach Vault: worth retrying, and the password read before is served.
  rig.vault.server().stop();
  const TokenResult during = rig.refresh("db", 500s);
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during.token->value.view(), "dyn-pass-1");
  EXPECT_EQ(during.token->expires_at, start + 900s);
  EXPECT_EQ(rig.stats("db").failures, 1U);
  EXPECT_TRUE(test::eventually([&] {  // the store logs the failure after counting it
    const auto lines = rig.log_lines();
    return std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
      return line.find("credential db: refresh failed (retrying") != std::string::npos &&
             line.find("/v1/sys/leases/renew: ") != std::string::npos;
    });
  }));
  // Served until the lease's end (each request past the backoff trying to renew again)...
  rig.clock.advance(390s);
  const TokenResult still = get(rig.store, "db");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still.token->value.view(), "dyn-pass-1");
  EXPECT_TRUE(test::eventually([&] { return rig.stats("db").failures == 2; }));
  // ...not after it: then no password, a retryable error with no status from Vault.
  rig.clock.advance(20s);
  const TokenResult after = get(rig.store, "db");
  ASSERT_FALSE(after.ok());
  EXPECT_TRUE(after.error->retryable);
  EXPECT_EQ(after.error->endpoint_status, 0U);
  EXPECT_NE(after.error->message.find("database/creds/readonly"), std::string::npos);
  expect_nothing_secret(after.error->message);
}

// ---------------------------------------------------------------------------------------------
// aws_secrets_manager against a stand-in of the regional endpoint: the request as the API wants
// it, AWS's refusal (its __type as the endpoint error, not retried), and the endpoint down
// (retried; the secret read before is still served).

TEST(SecretsManagerStore, ReadsAFieldAndSaysWhyWhenItCannot) {
  test::TempDir dir;
  const auto secret_file = [&](const std::string& name, const std::string& value) {
    const std::string path = dir.write(name, value + "\n");
    ::chmod(path.c_str(), 0600);
    return path;
  };
  test::FakeTokenServer server([](const test::TokenRequest& r) {
    const auto header = [&](const std::string& name) {
      const auto it = r.headers.find(name);
      return it == r.headers.end() ? std::string() : it->second;
    };
    if (r.method != "POST" || r.target != "/" ||
        header("x-amz-target") != "secretsmanager.GetSecretValue" ||
        header("authorization").rfind("AWS4-HMAC-SHA256 Credential=AKIASMSTORETEST00001/", 0) !=
            0 ||
        header("authorization").find("/us-west-2/secretsmanager/aws4_request") ==
            std::string::npos) {
      return test::TokenResponse{403, R"({"__type":"InvalidSignatureException"})",
                                 "application/x-amz-json-1.1"};
    }
    if (r.body != R"({"SecretId":"prod/api","VersionStage":"AWSPENDING"})") {
      return test::TokenResponse{
          400,
          R"({"__type":"com.amazonaws.secretsmanager#ResourceNotFoundException",)"
          R"("Message":"Secrets Manager can't find the specified secret."})",
          "application/x-amz-json-1.1"};
    }
    return test::TokenResponse{
        200, R"({"Name":"prod/api","SecretString":"{\"token\":\"sm-token-1\",\"user\":\"u\"}"})",
        "application/x-amz-json-1.1"};
  });
  ManualClock clock;
  StoreOptions o;
  o.clock = clock.fn();
  CredentialStore store(std::move(o));
  CredentialSpec keys;  // what GetSecretValue is signed with
  keys.name = "keys";
  keys.kind = ProviderKind::aws_static;
  keys.access_key_id_file = secret_file("key-id", "AKIASMSTORETEST00001");
  keys.secret_access_key_file = secret_file("secret", "sm/store/test/secret/key/0000000000001");
  CredentialSpec spec;
  spec.name = "api";
  spec.kind = ProviderKind::aws_secrets_manager;
  spec.aws_credential = "keys";
  spec.secret_id = "prod/api";
  spec.version_stage = "AWSPENDING";
  spec.json_field = "token";
  spec.region = "us-west-2";
  spec.endpoint_url = server.url();
  spec.ca_file = server.ca_file();
  spec.ttl = std::chrono::minutes(15);
  CredentialSpec missing = spec;
  missing.name = "missing";
  missing.secret_id = "prod/nope";
  store.update({keys, spec, missing});

  const TokenResult ok = get(store, "api");
  ASSERT_TRUE(ok.ok()) << ok.error->message;
  EXPECT_EQ(ok.token->value.view(), "sm-token-1");
  EXPECT_EQ(ok.token->refresh_at, clock.now() + std::chrono::minutes(15));
  const TokenResult nope = get(store, "missing");
  ASSERT_FALSE(nope.ok());
  EXPECT_FALSE(nope.error->retryable);
  EXPECT_EQ(nope.error->endpoint_status, 400U);
  EXPECT_EQ(nope.error->endpoint_error, "ResourceNotFoundException");
  EXPECT_EQ(nope.error->message.find("sm/store/test"), std::string::npos);

  server.stop();
  CredentialSpec down = spec;
  down.name = "down";
  store.update({keys, spec, down});
  const TokenResult unreachable = get(store, "down");
  ASSERT_FALSE(unreachable.ok());
  EXPECT_TRUE(unreachable.error->retryable);
  const TokenResult cached = get(store, "api");
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached.token->value.view(), "sm-token-1");
}

// THREATS 35: token endpoints are resolved by the store's own c-ares resolver (the servers the
// options name), not getaddrinfo. Each row is one oauth2 credential's token URL host.
class ResolvedEndpoints : public ::testing::Test {
 protected:
  ResolvedEndpoints() {
    dns_.add_record("tokens.test", "127.0.0.1", 60);
    dns_.set_reply("stuck.test", test::FakeDnsServer::Reply::drop);  // never answers
    dns_.set_reply("missing.test", test::FakeDnsServer::Reply::nxdomain);
    secret_ = dir_.write("secret", "s3cret\n");
    ::chmod(secret_.c_str(), 0600);
  }

  StoreOptions options() const {
    StoreOptions o;
    o.dns.servers = {dns_.address()};
    o.dns.timeout = 10s;  // longer than any fetch's: the fetch's deadline is what ends a lookup
    return o;
  }
  CredentialSpec spec(const std::string& name, const std::string& host,
                      std::chrono::milliseconds timeout = 3s) const {
    CredentialSpec out;
    out.name = name;
    out.kind = ProviderKind::oauth2_client_credentials;
    out.token_url = server_.url_for(host) + "/oauth/token";
    out.client_id = "sandgate";
    out.client_secret_file = secret_;
    out.ca_file = server_.ca_file();
    out.timeout = timeout;
    return out;
  }

  test::TempDir dir_;
  std::string secret_;
  test::FakeDnsServer dns_;
  test::FakeTokenServer server_{
      [](const test::TokenRequest&) {
        return test::TokenResponse{200, R"({"access_token":"oa_resolved","expires_in":3600})"};
      },
      {"localhost", "tokens.test"}};
};

TEST_F(ResolvedEndpoints, NamesLiteralsAndLocalhost) {
  struct Row {
    std::string host;
    bool ok;
    std::string error;        // part of the message when !ok
    std::size_t dns_queries;  // for `host`, A and AAAA
  };
  const std::vector<Row> rows = {
      {"tokens.test", true, "", 2},
      {"127.0.0.1", true, "", 0},  // a literal needs no DNS
      {"localhost", true, "", 0},  // RFC 6761: loopback, without DNS
      {"missing.test", false, "cannot resolve missing.test", 2},
  };
  CredentialStore store(options());
  std::vector<CredentialSpec> specs;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    specs.push_back(spec("c" + std::to_string(i), rows[i].host));
  }
  store.update(specs);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const TokenResult r = get(store, "c" + std::to_string(i));
    EXPECT_EQ(r.ok(), row.ok) << row.host << ": " << (r.ok() ? "" : r.error->message);
    if (r.ok()) {
      EXPECT_EQ(r.token->value.view(), "oa_resolved") << row.host;
    } else {
      EXPECT_NE(r.error->message.find(row.error), std::string::npos) << r.error->message;
      EXPECT_TRUE(r.error->retryable) << row.host;
    }
    EXPECT_EQ(dns_.queries(row.host), row.dns_queries) << row.host;
  }
}

// A token URL whose name never answers holds up its own fetch only: the healthy credential's
// first token comes at once meanwhile, and the stuck one fails when its own deadline passes.
TEST_F(ResolvedEndpoints, ANameThatNeverAnswersStallsNoOtherCredential) {
  CredentialStore store(options());
  store.update({spec("stuck", "stuck.test", 1500ms), spec("healthy", "tokens.test")});
  const auto started = std::chrono::steady_clock::now();
  auto stuck = std::async(std::launch::async, [&] { return get(store, "stuck"); });
  ASSERT_TRUE(test::eventually([&] { return dns_.queries("stuck.test") > 0; }));

  const auto before = std::chrono::steady_clock::now();
  const TokenResult healthy = get(store, "healthy");
  const auto took = std::chrono::steady_clock::now() - before;
  ASSERT_TRUE(healthy.ok()) << healthy.error->message;
  EXPECT_LT(took, 500ms);
  EXPECT_EQ(stuck.wait_for(0s), std::future_status::timeout);  // still waiting on DNS

  const TokenResult failed = stuck.get();
  const auto stuck_took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.error->retryable);
  EXPECT_NE(failed.error->message.find("cannot resolve stuck.test: timed out"), std::string::npos)
      << failed.error->message;
  EXPECT_GE(stuck_took, 1400ms);
  EXPECT_LT(stuck_took, 3s);
  EXPECT_EQ(server_.request_count(), 1u);  // the healthy one's
}

TEST(HttpsProvider, UntrustedCertificateFails) {
  test::TempDir dir;
  AppKey key(dir);
  test::FakeTokenServer server([](const test::TokenRequest&) {
    return test::TokenResponse{201, "{}"};
  });
  CredentialStore store;
  CredentialSpec spec = github_spec(key.path, server);
  spec.ca_file.clear();  // system roots only: the test CA is not among them
  store.update({spec});
  const TokenResult r = get(store, "github");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error->retryable);
  EXPECT_NE(r.error->message.find("TLS"), std::string::npos) << r.error->message;
  EXPECT_EQ(server.request_count(), 0u);
}

TEST(Excerpt, BoundedSingleLineAndWithoutSecrets) {
  EXPECT_EQ(excerpt("{\"message\":\"Bad credentials\"}", {}), "{\"message\":\"Bad credentials\"}");
  EXPECT_EQ(excerpt("line one\nline two\r\n", {}), "line one line two  ");
  EXPECT_EQ(excerpt("token eyJhbGci.abc.def here", {"eyJhbGci.abc.def"}),
            "token **************** here");
  const std::string secret = "s3cr3t";
  EXPECT_EQ(excerpt(std::string(300, 'a') + secret, {secret}, 200), std::string(200, 'a') + "...");
  EXPECT_EQ(excerpt(std::string(198, 'a') + secret, {secret}, 200),
            std::string(198, 'a') + "**...");
}

// The error code of a token endpoint's body, for the audit line: one known field, bounded,
// printable, with secret-looking words removed.
TEST(EndpointErrorCode, TakesOneKnownFieldAndNoSecret) {
  using detail::endpoint_error_code;
  EXPECT_EQ(endpoint_error_code(R"({"error":"invalid_client","error_description":"x"})", {}),
            "invalid_client");
  EXPECT_EQ(endpoint_error_code(R"({"message":"Bad credentials","documentation_url":"u"})", {}),
            "Bad credentials");
  EXPECT_EQ(endpoint_error_code("bad gateway", {}), "");
  EXPECT_EQ(endpoint_error_code(R"({"other":"x"})", {}), "");
  EXPECT_EQ(endpoint_error_code(R"({"error":42,"message":"m"})", {}), "m");
  EXPECT_EQ(endpoint_error_code(R"({"message":"token ghs_abcdEFGH is bad"})", {}),
            "token [redacted] is bad");
  EXPECT_EQ(endpoint_error_code(R"({"message":"got eyJhbGciOi.x.y"})", {}), "got [redacted]");
  EXPECT_EQ(endpoint_error_code(R"({"message":"key a1b2c3d4e5f6a7b8c9d0e1 leaked"})", {}),
            "key [redacted] leaked");
  EXPECT_EQ(endpoint_error_code(R"({"error":"sent s3cretval back"})", {"s3cretval"}),
            "sent [redacted] back");
  EXPECT_EQ(endpoint_error_code("{\"message\":\"a\\u001b[2Jb\\nc\"}", {}), "a [2Jb c");
  const std::string longest = endpoint_error_code(
      R"({"message":")" + std::string(50, 'x') + " " + std::string(50, 'y') + R"("})", {});
  EXPECT_EQ(longest.size(), kMaxEndpointErrorBytes);
}

TEST(Rfc3339, ParsesUtcAndOffsets) {
  const auto base = parse_rfc3339("2016-07-11T22:14:10Z");
  ASSERT_TRUE(base);
  EXPECT_EQ(WallClock::to_time_t(*base), 1468275250);
  EXPECT_EQ(parse_rfc3339("2016-07-11T23:14:10+01:00"), base);
  EXPECT_EQ(parse_rfc3339("2016-07-11T22:14:10.123Z"), base);
  EXPECT_FALSE(parse_rfc3339("2016-07-11 22:14"));
  EXPECT_FALSE(parse_rfc3339("2016-13-11T22:14:10Z"));
  EXPECT_FALSE(parse_rfc3339("2016-07-11T22:14:10"));
  EXPECT_FALSE(parse_rfc3339("2016-07-11T22:14:10Zjunk"));
}

}  // namespace
}  // namespace sandgate::secrets
