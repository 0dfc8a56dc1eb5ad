// aws_instance and aws_container through the CredentialStore, against loopback stand-ins of
// the instance metadata service (IMDSv2 only, as an instance configured so answers) and of the
// container credentials endpoint, over plain HTTP as the real ones are.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json/serialize.hpp>
#include <map>

#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/https_client.hpp"
#include "secrets/sigv4.hpp"
#include "support/eventually.hpp"
#include "support/fake_imds.hpp"
#include "support/fake_token_server.hpp"
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

std::string header_of(const test::TokenRequest& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

// The keys a stand-in hands out the n-th time, as JSON fields and as the store packs them.
struct Keys {
  std::string key_id, secret, token;
  std::string packed() const { return sigv4::pack_credentials({key_id, secret, token}); }
};
Keys keys_number(const std::string& who, int n) {
  const std::string id = std::to_string(n);
  return {"ASIA" + who + "KEY0000" + id, who + "/secret/key/" + id + "/xxxxxxxxxxxxxxxxxxxxxx",
          "IQoJb3JpZ2luX2VjE" + who + "SessionToken" + id};
}
std::string keys_json(const Keys& k, TimePoint expires, bool with_code) {
  json::object o;
  if (with_code) {
    o["Code"] = "Success";
    o["Type"] = "AWS-HMAC";
  }
  o["AccessKeyId"] = k.key_id;
  o["SecretAccessKey"] = k.secret;
  o["Token"] = k.token;
  o["Expiration"] = rfc3339(expires);
  return json::serialize(o);
}

// The instance's role is "agents"; its keys last an hour of the test's clock and change on
// every read.
class ImdsStandIn : public test::FakeImds {
 public:
  explicit ImdsStandIn(ManualClock& clock)
      : FakeImds("agents", clock.fn(), [&clock](int n) {
          return keys_json(keys_number("IMDS", n), clock.now() + 1h, true);
        }) {}
  // A GET as IMDSv1 makes it (no session token), or with `token`.
  test::TokenResponse answer_get(const std::string& target, const std::string& token) {
    test::TokenRequest r;
    r.method = "GET";
    r.target = target;
    if (!token.empty()) r.headers["x-aws-ec2-metadata-token"] = token;
    return answer(r);
  }
};

// The store's options with `clock`, no jitter, and its log lines kept for the test to read.
class LoggedStore {
 public:
  explicit LoggedStore(ManualClock& clock) : store_(options(clock)) {}
  CredentialStore& operator*() { return store_; }
  CredentialStore* operator->() { return &store_; }
  std::vector<std::string> lines() {
    const std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  StoreOptions options(ManualClock& clock) {
    StoreOptions o;
    o.clock = clock.fn();
    o.backoff = {1'000ms, 300'000ms};
    o.random = [] { return 0.0; };
    o.log = [this](std::string_view line) {
      const std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    };
    return o;
  }
  std::mutex mutex_;
  std::vector<std::string> lines_;
  CredentialStore store_;
};

class AwsInstanceStore : public ::testing::Test {
 protected:
  AwsInstanceStore() { store_->update({spec()}); }

  CredentialSpec spec(const std::string& name = "instance") {
    CredentialSpec out;
    out.name = name;
    out.kind = ProviderKind::aws_instance;
    out.endpoint_url = imds_.url();
    out.timeout = 3s;
    return out;
  }
  // No error and no log line holds a key, a session token or the IMDS session token.
  void expect_no_secret(const std::string& text) {
    for (const std::string_view secret :
         {std::string_view("AQAEAImdsSessionToken"), std::string_view("IMDS/secret"),
          std::string_view("SessionToken")}) {
      EXPECT_EQ(text.find(secret), std::string::npos) << text;
    }
  }
  void TearDown() override {
    for (const std::string& line : store_.lines()) expect_no_secret(line);
  }

  ManualClock clock_;
  ImdsStandIn imds_{clock_};
  LoggedStore store_{clock_};
};

// The three calls of IMDSv2, each GET with the session token; the keys until their Expiration,
// refreshed refresh_before it.
TEST_F(AwsInstanceStore, ReadsTheRolesKeysWithASessionToken) {
  const TimePoint t0 = clock_.now();
  const TokenResult r = get(*store_, "instance");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), keys_number("IMDS", 1).packed());
  EXPECT_EQ(r.token->expires_at, t0 + 1h);
  EXPECT_EQ(r.token->refresh_at, t0 + 50min);  // refresh_before: 10 min

  const auto requests = imds_.server().requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/latest/api/token");
  EXPECT_EQ(header_of(requests[0], "x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_EQ(header_of(requests[0], "x-aws-ec2-metadata-token"), "");
  EXPECT_EQ(requests[1].method, "GET");
  EXPECT_EQ(requests[1].target, "/latest/meta-data/iam/security-credentials/");
  EXPECT_EQ(requests[2].target, "/latest/meta-data/iam/security-credentials/agents");
  for (std::size_t i = 1; i < requests.size(); ++i) {
    EXPECT_EQ(header_of(requests[i], "x-aws-ec2-metadata-token"), "AQAEAImdsSessionToken1==");
  }

  // Refreshed ahead of Expiration (the cached keys served meanwhile), with the same session.
  clock_.advance(51min);
  const TokenResult cached = get(*store_, "instance");
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached.token->value.view(), keys_number("IMDS", 1).packed());
  ASSERT_TRUE(test::eventually([&] {
    const auto token = store_->cached("instance", {});
    return token && token->value.view() == keys_number("IMDS", 2).packed();
  }));
  EXPECT_EQ(imds_.sessions_given(), 1);
  EXPECT_EQ(imds_.server().request_count(), 5u);  // the role and its keys, again
}

// The stand-in refuses IMDSv1 as the instance does (control: the same GET with a session token
// is answered), and sandgate never sends one: every GET it sent carried the session token,
// and when no session can be had it sends no GET at all.
TEST_F(AwsInstanceStore, NeverFallsBackToImdsV1) {
  const std::string keys_path = "/latest/meta-data/iam/security-credentials/agents";
  EXPECT_EQ(imds_.answer_get(keys_path, "").status, 401u);
  ASSERT_TRUE(get(*store_, "instance").ok());
  EXPECT_EQ(imds_.answer_get(keys_path, "AQAEAImdsSessionToken1==").status, 200u);
  for (const auto& request : imds_.server().requests()) {
    if (request.method == "GET") {
      EXPECT_FALSE(header_of(request, "x-aws-ec2-metadata-token").empty()) << request.target;
    }
  }

  // The session token refused (as IMDS refuses a PUT that went through a proxy): no GET.
  imds_.server().set_handler([](const test::TokenRequest& r) {
    return r.method == "PUT" ? test::TokenResponse{403, "Forbidden", "text/plain"}
                             : test::TokenResponse{200, "agents", "text/plain"};
  });
  store_->update({spec("refused")});
  const std::size_t before = imds_.server().request_count();
  const TokenResult refused = get(*store_, "refused");
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error->retryable);
  EXPECT_EQ(refused.error->endpoint_status, 403u);
  EXPECT_NE(refused.error->message.find("/latest/api/token: HTTP 403"), std::string::npos)
      << refused.error->message;
  const auto requests = imds_.server().requests();
  ASSERT_EQ(requests.size(), before + 1);
  EXPECT_EQ(requests.back().method, "PUT");
}

// The session token is used until shortly before its TTL, then a new one is asked for; one
// IMDS forgot (it restarted) is replaced at once, within the same fetch.
TEST_F(AwsInstanceStore, AnExpiredOrForgottenSessionTokenIsFetchedAgain) {
  ASSERT_TRUE(get(*store_, "instance").ok());
  EXPECT_EQ(imds_.sessions_given(), 1);

  clock_.advance(6h);  // the keys and the session are both over
  const TokenResult later = get(*store_, "instance");
  ASSERT_TRUE(later.ok()) << later.error->message;
  EXPECT_EQ(later.token->value.view(), keys_number("IMDS", 2).packed());
  EXPECT_EQ(imds_.sessions_given(), 2);

  imds_.forget_sessions();
  clock_.advance(2h);
  const TokenResult after_restart = get(*store_, "instance");
  ASSERT_TRUE(after_restart.ok()) << after_restart.error->message;
  EXPECT_EQ(after_restart.token->value.view(), keys_number("IMDS", 3).packed());
  EXPECT_EQ(imds_.sessions_given(), 3);
  const auto requests = imds_.server().requests();
  ASSERT_GE(requests.size(), 3u);
  EXPECT_EQ(header_of(requests.back(), "x-aws-ec2-metadata-token"), "AQAEAImdsSessionToken3==");
}

// A configured role_name is read without the listing; a role the instance does not have, or
// an instance with none, is 404: not retryable, and said so.
TEST_F(AwsInstanceStore, ARoleNameOrItsAbsence) {
  CredentialSpec named = spec("named");
  named.role_name = "agents";
  CredentialSpec other = spec("other");
  other.role_name = "admins";
  store_->update({named, other});
  ASSERT_TRUE(get(*store_, "named").ok());
  const auto requests = imds_.server().requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].target, "/latest/meta-data/iam/security-credentials/agents");

  const TokenResult missing = get(*store_, "other");
  ASSERT_FALSE(missing.ok());
  EXPECT_FALSE(missing.error->retryable);
  EXPECT_EQ(missing.error->endpoint_status, 404u);
  EXPECT_NE(missing.error->message.find("security-credentials/admins: HTTP 404"), std::string::npos)
      << missing.error->message;
  expect_no_secret(missing.error->message);

  // An instance without a role: the listing is 404.
  imds_.server().set_handler([](const test::TokenRequest& r) {
    return r.method == "PUT" ? test::TokenResponse{200, "AQAEAImdsSessionToken9==", "text/plain"}
                             : test::TokenResponse{404, "Not Found", "text/html"};
  });
  store_->update({spec("roleless")});
  const TokenResult roleless = get(*store_, "roleless");
  ASSERT_FALSE(roleless.ok());
  EXPECT_FALSE(roleless.error->retryable);
  EXPECT_NE(roleless.error->message.find("security-credentials/: HTTP 404"), std::string::npos)
      << roleless.error->message;
}

// IMDS down: worth retrying; the keys read before are served until they expire.
TEST_F(AwsInstanceStore, EndpointDownIsRetryable) {
  ASSERT_TRUE(get(*store_, "instance").ok());
  imds_.server().stop();
  store_->update({spec(), spec("down")});
  const TokenResult down = get(*store_, "down");
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.error->retryable);
  EXPECT_EQ(down.error->endpoint_status, 0u);
  EXPECT_NE(down.error->message.find("cannot connect"), std::string::npos) << down.error->message;
  clock_.advance(55min);
  const TokenResult cached = get(*store_, "instance");
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached.token->value.view(), keys_number("IMDS", 1).packed());
  clock_.advance(10min);
  const TokenResult expired = get(*store_, "instance");
  ASSERT_FALSE(expired.ok());
  EXPECT_TRUE(expired.error->retryable);
}

// The container credentials endpoint (ECS, EKS Pod Identity): one GET of the full URI, with
// the Authorization token from its file when one is configured. The stand-in answers as the
// EKS Pod Identity Agent does: 401 without the pod's token or with another.
class AwsContainerStore : public ::testing::Test {
 protected:
  AwsContainerStore() {
    token_file_ = dir_.write("eks-pod-identity-token", "eyJpod.identity.token1\n");
    ::chmod(token_file_.c_str(), 0600);
  }

  test::TokenResponse serve(const test::TokenRequest& r) {
    const std::lock_guard lock(mutex_);  // the server's thread; the test sets what it answers
    if (r.method != "GET" || r.target != "/v1/credentials") return {404, "Not Found", "text/plain"};
    if (require_token_ && header_of(r, "authorization") != "eyJpod.identity.token1") {
      return {401, R"({"message":"Service account token cannot be empty or invalid"})"};
    }
    if (!answer_.empty()) return {200, answer_};
    return {200, keys_json(keys_number("POD", ++given_), clock_.now() + 6h, false)};
  }
  CredentialSpec spec(const std::string& name, bool with_token) {
    CredentialSpec out;
    out.name = name;
    out.kind = ProviderKind::aws_container;
    out.endpoint_url = server_.url_for("127.0.0.1") + "/v1/credentials";
    if (with_token) out.authorization_token_file = token_file_;
    out.timeout = 3s;
    return out;
  }

  test::TempDir dir_;
  std::string token_file_;
  ManualClock clock_;
  void require_token() {
    const std::lock_guard lock(mutex_);
    require_token_ = true;
  }
  // The endpoint's 200 answer instead of fresh keys; "": fresh keys again.
  void answer_with(std::string body) {
    const std::lock_guard lock(mutex_);
    answer_ = std::move(body);
  }

  std::mutex mutex_;
  bool require_token_ = false;
  std::string answer_;
  int given_ = 0;
  test::FakeTokenServer server_{[this](const test::TokenRequest& r) { return serve(r); },
                                test::FakeTokenServer::PlainHttp{}};
  LoggedStore store_{clock_};
};

TEST_F(AwsContainerStore, WithoutAnAuthorizationToken) {
  store_->update({spec("task", false)});
  const TimePoint t0 = clock_.now();
  const TokenResult r = get(*store_, "task");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), keys_number("POD", 1).packed());
  EXPECT_EQ(r.token->expires_at, t0 + 6h);
  EXPECT_EQ(r.token->refresh_at, t0 + 6h - 10min);
  ASSERT_EQ(server_.request_count(), 1u);
  EXPECT_EQ(header_of(server_.requests()[0], "authorization"), "");

  clock_.advance(6h - 9min);  // due for refresh: the cached keys meanwhile, then new ones
  ASSERT_TRUE(get(*store_, "task").ok());
  ASSERT_TRUE(test::eventually([&] {
    const auto token = store_->cached("task", {});
    return token && token->value.view() == keys_number("POD", 2).packed();
  }));
}

TEST_F(AwsContainerStore, WithTheAuthorizationTokenFileAndAWrongToken) {
  require_token();
  store_->update({spec("pod", true), spec("no-token", false)});
  const TokenResult r = get(*store_, "pod");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), keys_number("POD", 1).packed());
  EXPECT_EQ(header_of(server_.requests()[0], "authorization"), "eyJpod.identity.token1");

  const TokenResult none = get(*store_, "no-token");
  ASSERT_FALSE(none.ok());
  EXPECT_FALSE(none.error->retryable);
  EXPECT_EQ(none.error->endpoint_status, 401u);

  // A token the agent does not take (rotated, or another pod's): not retryable, and it is
  // in no message.
  ::chmod(token_file_.c_str(), 0600);
  dir_.write("eks-pod-identity-token", "eyJpod.identity.WRONGtoken\n");
  ::chmod(token_file_.c_str(), 0600);
  store_->update({spec("pod-wrong", true)});
  const TokenResult wrong = get(*store_, "pod-wrong");
  ASSERT_FALSE(wrong.ok());
  EXPECT_FALSE(wrong.error->retryable);
  EXPECT_EQ(wrong.error->endpoint_status, 401u);
  EXPECT_NE(wrong.error->message.find("/v1/credentials: HTTP 401: Service account"),
            std::string::npos)
      << wrong.error->message;
  for (const std::string& text : store_.lines()) {
    EXPECT_EQ(text.find("eyJpod"), std::string::npos) << text;
    EXPECT_EQ(text.find("POD/secret"), std::string::npos) << text;
  }
  EXPECT_EQ(wrong.error->message.find("eyJpod"), std::string::npos);
}

TEST_F(AwsContainerStore, EndpointDownIsRetryableAndAnUnreadableTokenFileIsNot) {
  CredentialSpec unreadable = spec("unreadable", true);
  unreadable.authorization_token_file = dir_.file("missing-token");
  server_.stop();
  store_->update({spec("down", false), unreadable});
  const TokenResult down = get(*store_, "down");
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.error->retryable);
  const TokenResult missing = get(*store_, "unreadable");
  ASSERT_FALSE(missing.ok());
  EXPECT_FALSE(missing.error->retryable);
  EXPECT_NE(missing.error->message.find("missing-token"), std::string::npos)
      << missing.error->message;
}

// Whether `r` is signed (SigV4) with `keys`, its session token sent and signed, as AWS checks.
bool signed_with(const test::TokenRequest& r, const Keys& keys) {
  const auto auth = sigv4::parse_authorization(header_of(r, "authorization"));
  if (!auth || auth->access_key_id != keys.key_id ||
      header_of(r, "x-amz-security-token") != keys.token ||
      std::find(auth->signed_headers.begin(), auth->signed_headers.end(), "x-amz-security-token") ==
          auth->signed_headers.end()) {
    return false;
  }
  std::vector<sigv4::Field> fields;
  for (const auto& [name, value] : r.headers) fields.push_back({name, value});
  const auto canonical =
      sigv4::canonical_request({r.method, r.target, fields}, auth->signed_headers,
                               sha256_hex(r.body), sigv4::PathRule::standard);
  if (!canonical) return false;
  const std::string to_sign =
      sigv4::string_to_sign(header_of(r, "x-amz-date"), auth->scope, *canonical);
  return sigv4::SigningKey(keys.secret, auth->scope).sign(to_sign) == auth->signature;
}

// The commonest case: the instance's role assumes another. STS gets AssumeRole signed with
// the keys IMDS gave (their session token sent and signed); those keys are the store's cached
// ones, shared with any rule that uses the instance credential itself; an IMDS failure is the
// role's, naming the credential it came from.
TEST(AssumeRoleStore, SignsWithTheInstancesKeys) {
  ManualClock clock;
  ImdsStandIn imds(clock);
  int assumed = 0;
  test::FakeTokenServer sts([&](const test::TokenRequest& r) {
    if (!signed_with(r, keys_number("IMDS", 1))) {
      return test::TokenResponse{
          403, "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>",
          "text/xml"};
    }
    const Keys k = keys_number("STS", ++assumed);
    return test::TokenResponse{
        200,
        "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>" + k.key_id +
            "</AccessKeyId><SecretAccessKey>" + k.secret + "</SecretAccessKey><SessionToken>" +
            k.token + "</SessionToken><Expiration>" + rfc3339(clock.now() + 1h) +
            "</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>",
        "text/xml"};
  });
  LoggedStore store(clock);
  CredentialSpec instance;
  instance.name = "instance";
  instance.kind = ProviderKind::aws_instance;
  instance.endpoint_url = imds.url();
  CredentialSpec role;
  role.name = "deploy";
  role.kind = ProviderKind::aws_assume_role;
  role.aws_credential = "instance";
  role.role_arn = "arn:aws:iam::210987654321:role/deploy";
  role.endpoint_url = sts.url();
  role.ca_file = sts.ca_file();
  role.ttl = 1h;
  store->update({instance, role});

  const TimePoint t0 = clock.now();
  const TokenResult r = get(*store, "deploy");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.token->value.view(), keys_number("STS", 1).packed());
  EXPECT_EQ(r.token->expires_at, t0 + 1h);
  ASSERT_EQ(sts.request_count(), 1u);
  EXPECT_NE(
      sts.requests()[0].body.find("RoleArn=arn%3Aaws%3Aiam%3A%3A210987654321%3Arole%2Fdeploy"),
      std::string::npos);
  const TokenResult own = get(*store, "instance");  // the instance's keys, from the cache
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own.token->value.view(), keys_number("IMDS", 1).packed());
  EXPECT_EQ(imds.keys_given(), 1);

  // IMDS down (a fresh credential on it has nothing cached): the role fails as IMDS did,
  // retryable, and says where the failure was.
  imds.server().stop();
  CredentialSpec down = instance;
  down.name = "instance-down";
  CredentialSpec role_down = role;
  role_down.name = "deploy-down";
  role_down.aws_credential = "instance-down";
  store->update({instance, role, down, role_down});
  const TokenResult failed = get(*store, "deploy-down");
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.error->retryable);
  EXPECT_NE(failed.error->message.find(
                "credentials.deploy-down: its aws_credential instance-down has no keys: "
                "credentials.instance-down: http://127.0.0.1:"),
            std::string::npos)
      << failed.error->message;
  EXPECT_EQ(sts.request_count(), 1u);
  for (const std::string& line : store.lines()) {
    EXPECT_EQ(line.find("secret/key"), std::string::npos) << line;
    EXPECT_EQ(line.find("SessionToken"), std::string::npos) << line;
  }
}

// A 200 whose keys cannot be used is a failure worth retrying (the agent may answer right
// later), saying why without quoting them.
TEST_F(AwsContainerStore, AnAnswerWithoutUsableKeysIsARetryableFailure) {
  struct Row {
    std::string name;
    std::string answer;
    std::string message;
  };
  const Keys k = keys_number("POD", 7);
  const std::vector<Row> rows = {
      {"no-token",
       R"({"AccessKeyId":")" + k.key_id + R"(","SecretAccessKey":")" + k.secret +
           R"(","Expiration":")" + rfc3339(clock_.now() + 1h) + R"("})",
       "the answer holds no temporary credentials"},
      {"expired", keys_json(k, clock_.now() - 1min, false), "the keys it answered expired at"},
      {"not-json", "<html>maintenance</html>", "the answer holds no temporary credentials"},
      {"imds-code", R"({"Code":"AssumeRoleUnauthorizedAccess"})",
       "the endpoint answered Code AssumeRoleUnauthorizedAccess"},
  };
  for (const Row& row : rows) {
    answer_with(row.answer);
    store_->update({spec(row.name, false)});
    const TokenResult r = get(*store_, row.name);
    ASSERT_FALSE(r.ok()) << row.name;
    EXPECT_TRUE(r.error->retryable) << row.name;
    EXPECT_NE(r.error->message.find(row.message), std::string::npos) << r.error->message;
    EXPECT_EQ(r.error->message.find("POD/secret"), std::string::npos) << r.error->message;
    EXPECT_EQ(r.error->message.find(k.key_id), std::string::npos) << r.error->message;
  }
  answer_with("");  // control: the same endpoint with fresh keys
  store_->update({spec("fresh", false)});
  EXPECT_TRUE(get(*store_, "fresh").ok());
}

// Plain HTTP only for a caller that holds no TLS context: a provider whose endpoint must be
// HTTPS (it holds one) is refused an http:// URL before anything is sent.
TEST(PlainHttpExchange, OnlyWithoutATlsContext) {
  test::FakeTokenServer server([](const test::TokenRequest&) { return test::TokenResponse{}; },
                               test::FakeTokenServer::PlainHttp{});
  const auto exchange = [&](std::shared_ptr<asio::ssl::context> ctx) {
    asio::io_context io;
    HttpsRequest request;
    request.method = "GET";
    request.url = server.url_for("127.0.0.1") + "/x";
    auto future = asio::co_spawn(io,
                                 https_exchange(std::move(ctx), std::move(request), nullptr,
                                                std::chrono::steady_clock::now() + 3s, 1024),
                                 asio::use_future);
    io.run();
    return future.get();
  };
  const HttpsResult refused = exchange(make_client_context(""));
  EXPECT_FALSE(refused.response);
  EXPECT_NE(refused.error.find("refusing plain http://"), std::string::npos) << refused.error;
  EXPECT_EQ(server.request_count(), 0u);
  const HttpsResult plain = exchange(nullptr);
  ASSERT_TRUE(plain.response) << plain.error;
  EXPECT_EQ(plain.response->status, 200u);
  EXPECT_EQ(server.request_count(), 1u);
}

}  // namespace
}  // namespace sandgate::secrets
