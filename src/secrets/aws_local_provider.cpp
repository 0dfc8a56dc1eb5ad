// The providers of the keys of the role sandgate itself runs as, from the endpoints AWS puts
// beside it: provider = "aws_instance" (an EC2 instance's role, from the instance metadata
// service, IMDSv2 only) and provider = "aws_container" (an ECS task's role, or an EKS pod's
// through Pod Identity, from the container credentials endpoint). Both answer plain HTTP on a
// link-local address with the same JSON (AccessKeyId, SecretAccessKey, Token, Expiration);
// the keys are packed (sigv4::pack_credentials) and cached until `refresh_before` their
// Expiration, like every token (docs/credentials.md, "aws_instance and aws_container").
#include <boost/json.hpp>

#include "common/version.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/provider.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using SteadyTime = std::chrono::steady_clock::time_point;

// The IMDSv2 session lifetime asked for: the longest IMDS grants.
constexpr std::chrono::seconds kSessionTtl{21600};
// A session token is not used in its last minute: a fetch that starts with it must not see it
// expire halfway.
constexpr std::chrono::seconds kSessionMargin{60};
constexpr std::string_view kRolesPath = "/latest/meta-data/iam/security-credentials/";

std::string user_agent() {
  return "sandgate/" + std::string(kVersion);
}

// The keys of an instance or container endpoint's answer, packed, until their Expiration; or
// the failure it is (status_failure for a non-2xx; anything else is worth retrying: the
// endpoint is the local agent's, and what it answers wrongly now it may answer right later).
FetchResult keys_of(const std::string& what, const HttpsResult& result,
                    const std::vector<std::string_view>& secrets, TimePoint now) {
  if (!result.response) return fetch_failure(true, what + ": " + result.error);
  const HttpsResponse& response = *result.response;
  if (response.status / 100 != 2) return detail::status_failure(what, response, secrets);
  boost::system::error_code ec;
  const json::value parsed = json::parse(response.body, ec);
  const json::object* object = ec ? nullptr : parsed.if_object();
  const auto field = [&](std::string_view name) {
    const json::value* v = object != nullptr ? object->if_contains(name) : nullptr;
    return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
  };
  // IMDS says "Success", or names what went wrong; the container endpoints send no Code.
  if (const std::string code = field("Code"); !code.empty() && code != "Success") {
    return fetch_failure(
        true, what + ": the endpoint answered Code " + detail::sanitized_error(code, secrets));
  }
  std::string key_id = field("AccessKeyId");
  std::string secret = field("SecretAccessKey");
  std::string token = field("Token");
  return detail::temporary_keys(what, key_id, secret, token, field("Expiration"), now);
}

// provider = "aws_instance". A session token (PUT /latest/api/token), then the role's name
// (unless configured) and its keys, each GET with the token. Never a GET without one: that is
// IMDSv1, what a server-side request forgery abuses, and what an IMDSv2-only instance refuses.
// The session token is kept until shortly before its TTL and reused by later fetches.
class InstanceProvider final : public Provider {
 public:
  InstanceProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec),
        context_(std::move(context)),
        base_(spec.endpoint_url.empty() ? "http://169.254.169.254" : spec.endpoint_url) {}

  asio::awaitable<FetchResult> fetch(Scope) override {
    const SteadyTime deadline = std::chrono::steady_clock::now() + spec_.timeout;
    const bool reused = has_session();
    FetchResult out = co_await fetch_keys(deadline);
    if (reused && out.error.endpoint_status == 401) {
      // IMDS no longer knows the session it gave (it restarted): once more with a new one.
      session_ = SecretBytes();
      out = co_await fetch_keys(deadline);
    }
    co_return out;
  }

 private:
  bool has_session() const { return !session_.empty() && context_.clock() < session_until_; }

  asio::awaitable<FetchResult> fetch_keys(SteadyTime deadline) {
    if (!has_session()) {
      std::optional<FetchResult> failure = co_await new_session(deadline);
      if (failure) co_return std::move(*failure);
    }
    // Copied for this fetch: another scope's fetch may replace the session meanwhile.
    std::string session(session_.view());
    std::string role = spec_.role_name;
    if (role.empty()) {
      const std::string path(kRolesPath);
      HttpsResult listed = co_await get(path, session, deadline);
      std::optional<FetchResult> failure = role_of(listed, session, role);
      if (listed.response) cleanse(listed.response->body);
      if (failure) {
        cleanse(session);
        co_return std::move(*failure);
      }
    }
    const std::string path = std::string(kRolesPath) + role;
    HttpsResult answer = co_await get(path, session, deadline);
    FetchResult out = keys_of(what(path), answer, {session}, context_.clock());
    if (answer.response) cleanse(answer.response->body);
    cleanse(session);
    co_return out;
  }

  // PUT /latest/api/token: a session token for kSessionTtl, kept in session_; or the failure.
  asio::awaitable<std::optional<FetchResult>> new_session(SteadyTime deadline) {
    HttpsRequest request;
    request.method = "PUT";
    request.url = base_ + "/latest/api/token";
    request.headers = {
        {"X-aws-ec2-metadata-token-ttl-seconds", std::to_string(kSessionTtl.count())},
        {"User-Agent", user_agent()}};
    const TimePoint asked = context_.clock();
    HttpsResult result = co_await https_exchange(nullptr, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    const std::string where = what("/latest/api/token");
    std::optional<FetchResult> failure;
    if (!result.response) {
      failure = fetch_failure(true, where + ": " + result.error);
    } else if (result.response->status / 100 != 2) {
      failure = detail::status_failure(where, *result.response, {});
    } else if (result.response->body.empty() ||
               result.response->body.find_first_of("\r\n") != std::string::npos) {
      failure = fetch_failure(true, where + ": the answer is not a session token");
    } else {
      session_ = SecretBytes(result.response->body);
      session_until_ = asked + kSessionTtl - kSessionMargin;
    }
    if (result.response) cleanse(result.response->body);
    co_return failure;
  }

  asio::awaitable<HttpsResult> get(const std::string& path, const std::string& session,
                                   SteadyTime deadline) {
    HttpsRequest request;
    request.method = "GET";
    request.url = base_ + path;
    request.headers = {{"X-aws-ec2-metadata-token", session}, {"User-Agent", user_agent()}};
    co_return co_await https_exchange(nullptr, std::move(request), context_.resolver, deadline,
                                      detail::kMaxTokenResponse);
  }

  // The role IMDS lists (one per instance profile: the first line), into `role`; or the
  // failure (404: the instance has no role).
  std::optional<FetchResult> role_of(const HttpsResult& listed, const std::string& session,
                                     std::string& role) const {
    const std::string where = what(std::string(kRolesPath));
    if (!listed.response) return fetch_failure(true, where + ": " + listed.error);
    if (listed.response->status / 100 != 2) {
      return detail::status_failure(where, *listed.response, {session});
    }
    const std::string& body = listed.response->body;
    std::string first = body.substr(0, body.find_first_of("\r\n"));
    if (!valid_role_name(first)) {
      return fetch_failure(false, where + ": the answer is not a role name (no role attached?)");
    }
    role = std::move(first);
    return std::nullopt;
  }

  std::string what(const std::string& path) const {
    return "credentials." + spec_.name + ": " + base_ + path;
  }

  CredentialSpec spec_;
  ProviderContext context_;
  std::string base_;  // http://HOST[:PORT], no trailing '/'
  SecretBytes session_;
  TimePoint session_until_;
};

// provider = "aws_container": GET endpoint_url, with the Authorization token read from its
// file on every fetch (EKS rotates it) when one is configured.
class ContainerProvider final : public Provider {
 public:
  ContainerProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)) {
    if (spec_.endpoint_url.starts_with("https://")) client_ = detail::client_context(spec.ca_file);
  }

  asio::awaitable<FetchResult> fetch(Scope) override {
    const SteadyTime deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    const std::string what = "credentials." + spec_.name + ": " + spec_.endpoint_url;
    HttpsRequest request;
    request.method = "GET";
    request.url = spec_.endpoint_url;
    request.headers = {{"Accept", "application/json"}, {"User-Agent", user_agent()}};
    SecretFile authorization;
    if (!spec_.authorization_token_file.empty()) {
      authorization = read_secret_file(spec_.authorization_token_file, "authorization token file");
      if (!authorization.ok()) co_return fetch_failure(false, authorization.error);
      const std::string_view value = authorization.content.view();
      if (value.find_first_not_of(" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") !=
          std::string_view::npos) {
        co_return fetch_failure(false, "credentials." + spec_.name + ": " +
                                           spec_.authorization_token_file +
                                           ": the token holds a line break or a byte that is not "
                                           "printable ASCII");
      }
      request.headers.emplace_back("Authorization", std::string(value));
    }
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = keys_of(what, result, {authorization.content.view()}, context_.clock());
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;  // none for http://
};

}  // namespace

std::shared_ptr<Provider> make_aws_instance_provider(const CredentialSpec& spec,
                                                     ProviderContext context) {
  return std::make_shared<InstanceProvider>(spec, std::move(context));
}

std::shared_ptr<Provider> make_aws_container_provider(const CredentialSpec& spec,
                                                      ProviderContext context) {
  return std::make_shared<ContainerProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
