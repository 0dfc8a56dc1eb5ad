// The providers of AWS credentials. Each yields one token holding the key id, the secret and
// the session token (sigv4::pack_credentials), which requests get by being signed again
// (docs/credentials.md, "AWS").
//
// provider = "aws_static": a key pair (and, for temporary credentials, a session token) in
// files, read again when a file changes.
//
// provider = "aws_secrets_manager": a secret (or one JSON field of it) read with GetSecretValue,
// signed with the keys of the AWS credential aws_credential names, read again every ttl.
//
// provider = "aws_assume_role" / "aws_web_identity": temporary keys from STS (AssumeRole,
// signed with the aws_credential's keys; AssumeRoleWithWebIdentity, with the OIDC token in a
// file, as EKS projects it), cached until shortly before they expire.
//
// The aws_credential is any AWS key source (aws_static, aws_instance, aws_container,
// aws_web_identity, aws_assume_role): its keys come through the store (token_of), cached and
// refreshed as its own.
#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <ctime>
#include <sstream>

#include "common/version.hpp"
#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/provider.hpp"
#include "secrets/secret_file.hpp"
#include "secrets/sigv4.hpp"

namespace sandgate::secrets {

namespace {

namespace json = boost::json;

// How often a request also checks whether the files changed (stats, on the store's thread).
constexpr auto kRecheck = std::chrono::seconds(2);

// The keys of an aws_static credential, packed (sigv4::pack_credentials); a failure names the
// file. Never retryable: a missing, unreadable or malformed file cannot mend itself without the
// operator.
FetchResult read_aws_keys(const CredentialSpec& spec) {
  SecretFile key_id = read_secret_file(spec.access_key_id_file, "access key id file");
  if (!key_id.ok()) return fetch_failure(false, key_id.error);
  SecretFile secret = read_secret_file(spec.secret_access_key_file, "secret access key file");
  if (!secret.ok()) return fetch_failure(false, secret.error);
  SecretFile session;
  if (!spec.session_token_file.empty()) {
    session = read_secret_file(spec.session_token_file, "session token file");
    if (!session.ok()) return fetch_failure(false, session.error);
  }
  std::string packed = sigv4::pack_credentials(
      {key_id.content.view(), secret.content.view(), session.content.view()});
  FetchResult out;
  if (!sigv4::unpack_credentials(packed)) {
    out = fetch_failure(false, "credential " + spec.name +
                                   ": a key file holds a space, a line break or a byte that is "
                                   "not ASCII (each file holds its value on one line)");
  } else {
    Fetched fetched;
    fetched.value = SecretBytes(packed);
    out.token = std::move(fetched);
  }
  cleanse(packed);
  return out;
}

// The keys of the credential spec.aws_credential names, as the store holds them, waited for
// until `deadline`; its failure, retryable as it is, naming it.
boost::asio::awaitable<FetchResult> base_keys(const CredentialSpec& spec,
                                              const ProviderContext& context,
                                              std::chrono::steady_clock::time_point deadline) {
  const std::string what =
      "credentials." + spec.name + ": its aws_credential " + spec.aws_credential;
  if (!context.token_of) co_return fetch_failure(false, what + ": no store to ask");
  const std::string name = spec.aws_credential;
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - std::chrono::steady_clock::now()),
                             std::chrono::milliseconds(1));
  const TokenResult base = co_await context.token_of(name, left);
  if (!base.ok()) {
    co_return fetch_failure(base.error->retryable, what + " has no keys: " + base.error->message);
  }
  if (!sigv4::unpack_credentials(base.token->value.view())) {
    co_return fetch_failure(false, what + " holds no AWS keys");
  }
  Fetched fetched;
  fetched.value = SecretBytes(base.token->value.view());
  FetchResult out;
  out.token = std::move(fetched);
  co_return out;
}

class AwsStaticProvider final : public Provider {
 public:
  AwsStaticProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope) override {
    FetchResult out = read_aws_keys(spec_);
    if (out.token) out.token->refresh_at = context_.clock() + kRecheck;
    co_return out;
  }

 private:
  CredentialSpec spec_;
  ProviderContext context_;
};

// YYYYMMDDTHHMMSSZ, UTC.
std::string amz_date_of(TimePoint t) {
  const std::time_t seconds = WallClock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char out[17];
  std::strftime(out, sizeof out, "%Y%m%dT%H%M%SZ", &utc);
  return out;
}

// Signs a POST sandgate itself sends to an AWS API with `keys`: `fields` (lowercase names), the
// host, X-Amz-Date and the session token are signed; all but the host become request headers,
// with the Authorization.
void sign_post(HttpsRequest& request, std::vector<sigv4::Field> fields, std::string_view region,
               std::string_view service, TimePoint now, const sigv4::Credentials& keys) {
  const std::string amz_date = amz_date_of(now);
  const std::string host = request.url.substr(8, request.url.find('/', 8) - 8);
  fields.push_back({"host", host});
  fields.push_back({"x-amz-date", amz_date});
  if (!keys.session_token.empty()) fields.push_back({"x-amz-security-token", keys.session_token});
  const sigv4::Scope scope{amz_date.substr(0, 8), std::string(region), std::string(service)};
  const std::string authorization = sigv4::authorization_for(
      {"POST", "/", fields}, sha256_hex(request.body), scope, amz_date, keys);
  for (const sigv4::Field& f : fields) {
    if (f.name != "host") request.headers.emplace_back(f.name, f.value);
  }
  request.headers.emplace_back("Authorization", authorization);
}

class StsProvider final : public Provider {
 public:
  // The role session's name (CloudTrail's record of who acted): role_session_name, else
  // "sandgate-" and the sandbox it is for, else the credential's name. STS takes at most 64 of
  // [A-Za-z0-9+=,.@_-]; any other byte becomes '-'.
  std::string session_name(const Scope& scope) const {
    std::string name = !spec_.role_session_name.empty() ? spec_.role_session_name
                       : !scope.sandbox.empty()         ? "sandgate-" + scope.sandbox
                                                        : "sandgate-" + spec_.name;
    name.resize(std::min<std::size_t>(name.size(), 64));
    for (char& c : name) {
      const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') ||
                           std::string_view("+=,.@_-").find(c) != std::string_view::npos;
      if (!allowed) c = '-';
    }
    return name;
  }

  StsProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope scope) override {
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    const bool web_identity = spec_.kind == ProviderKind::aws_web_identity;
    const std::string session = session_name(scope);
    HttpsRequest request;
    request.method = "POST";
    request.url = endpoint();
    request.body = std::string("Action=") +
                   (web_identity ? "AssumeRoleWithWebIdentity" : "AssumeRole") +
                   "&Version=2011-06-15&RoleArn=" + detail::form_encode(spec_.role_arn) +
                   "&RoleSessionName=" + detail::form_encode(session) +
                   "&DurationSeconds=" + std::to_string(spec_.ttl.count());
    request.headers = {{"User-Agent", "sandgate/" + std::string(kVersion)}};
    constexpr std::string_view kForm = "application/x-www-form-urlencoded; charset=utf-8";
    std::vector<std::string_view> secrets;
    SecretFile identity;
    FetchResult base;
    if (web_identity) {
      identity = read_secret_file(spec_.web_identity_token_file, "web identity token file");
      if (!identity.ok()) co_return fetch_failure(false, identity.error);
      request.body += "&WebIdentityToken=" + detail::form_encode(identity.content.view());
      request.headers.emplace_back("Content-Type", kForm);
      secrets.push_back(identity.content.view());
    } else {
      base = co_await base_keys(spec_, context_, deadline);
      if (!base.token) co_return base;
      const auto keys = sigv4::unpack_credentials(base.token->value.view());
      sign_post(request, {{"content-type", kForm}},
                spec_.region.empty() ? "us-east-1" : spec_.region, "sts", context_.clock(), *keys);
      secrets = {keys->secret_access_key, keys->session_token};
    }
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = interpret(result, secrets, web_identity);
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  std::string endpoint() const {
    if (!spec_.endpoint_url.empty()) return spec_.endpoint_url + "/";
    if (spec_.region.empty()) return "https://sts.amazonaws.com/";
    return "https://sts." + spec_.region + ".amazonaws.com/";
  }

  FetchResult interpret(const HttpsResult& result, const std::vector<std::string_view>& secrets,
                        bool web_identity) const {
    const std::string what = "credentials." + spec_.name + ": " + endpoint() + " " + spec_.role_arn;
    if (!result.response) return fetch_failure(true, what + ": " + result.error);
    const HttpsResponse& response = *result.response;
    namespace pt = boost::property_tree;
    pt::ptree tree;
    try {
      std::istringstream in(response.body);
      pt::read_xml(in, tree, pt::xml_parser::trim_whitespace);
    } catch (const pt::ptree_error&) {
      tree.clear();
    }
    if (response.status / 100 != 2) {
      // STS names the error in <ErrorResponse><Error><Code>.
      return detail::status_failure(what, response, secrets,
                                    tree.get<std::string>("ErrorResponse.Error.Code", ""));
    }
    const std::string action = web_identity ? "AssumeRoleWithWebIdentity" : "AssumeRole";
    const auto credentials =
        tree.get_child_optional(action + "Response." + action + "Result.Credentials");
    const auto field = [&](const char* name) {
      return credentials ? credentials->get<std::string>(name, "") : std::string();
    };
    std::string key_id = field("AccessKeyId");
    std::string secret = field("SecretAccessKey");
    std::string token = field("SessionToken");
    return detail::temporary_keys(what, key_id, secret, token, field("Expiration"),
                                  context_.clock());
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
};

// provider = "aws_secrets_manager": GetSecretValue, signed with the aws_credential's keys.
class SecretsManagerProvider final : public Provider {
 public:
  SecretsManagerProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope) override {
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    FetchResult keys = co_await base_keys(spec_, context_, deadline);
    if (!keys.token) co_return keys;
    const std::optional<sigv4::Credentials> real =
        sigv4::unpack_credentials(keys.token->value.view());

    json::object body{{"SecretId", spec_.secret_id}};
    if (!spec_.version_stage.empty()) body["VersionStage"] = spec_.version_stage;
    HttpsRequest request;
    request.method = "POST";
    request.url = endpoint();
    request.body = json::serialize(body);
    sign_post(request,
              {{"content-type", "application/x-amz-json-1.1"},
               {"x-amz-target", "secretsmanager.GetSecretValue"}},
              spec_.region, "secretsmanager", context_.clock(), *real);
    request.headers.emplace_back("User-Agent", "sandgate/" + std::string(kVersion));
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = interpret(result, {real->secret_access_key, real->session_token});
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  std::string endpoint() const {
    if (!spec_.endpoint_url.empty()) return spec_.endpoint_url + "/";
    return "https://secretsmanager." + spec_.region + ".amazonaws.com/";
  }

  FetchResult interpret(const HttpsResult& result,
                        const std::vector<std::string_view>& secrets) const {
    const std::string what =
        "credentials." + spec_.name + ": " + endpoint() + " " + spec_.secret_id;
    if (!result.response) return fetch_failure(true, what + ": " + result.error);
    const HttpsResponse& response = *result.response;
    boost::system::error_code ec;
    const json::value parsed = json::parse(response.body, ec);
    const json::object* object = ec ? nullptr : parsed.if_object();
    if (response.status / 100 != 2) {
      // AWS names the error in __type ("ResourceNotFoundException", or namespaced with '#').
      const json::value* type = object != nullptr ? object->if_contains("__type") : nullptr;
      std::string_view code;
      if (type != nullptr && type->is_string())
        code = {type->as_string().data(), type->as_string().size()};
      if (code.find('#') != std::string_view::npos) code.remove_prefix(code.find('#') + 1);
      return detail::status_failure(what, response, secrets, code);
    }
    const json::value* text = object != nullptr ? object->if_contains("SecretString") : nullptr;
    if (text == nullptr || !text->is_string()) {
      return fetch_failure(false, what + ": the answer has no SecretString (a binary secret?)");
    }
    std::string_view value(text->as_string().data(), text->as_string().size());
    json::value inner;
    if (!spec_.json_field.empty()) {
      inner = json::parse(value, ec);
      const json::object* fields = ec ? nullptr : inner.if_object();
      const json::value* field =
          fields != nullptr ? fields->if_contains(spec_.json_field) : nullptr;
      if (field == nullptr || !field->is_string()) {
        return fetch_failure(
            false,
            what + ": the secret is not a JSON object with a string field " + spec_.json_field);
      }
      value = std::string_view(field->as_string().data(), field->as_string().size());
    }
    if (value.empty()) return fetch_failure(false, what + ": the secret is empty");
    Fetched fetched;
    fetched.value = SecretBytes(value);
    fetched.refresh_at = context_.clock() + spec_.ttl;
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
};

}  // namespace

namespace detail {

FetchResult temporary_keys(std::string_view what, std::string& key_id, std::string& secret,
                           std::string& session_token, std::string_view expiration, TimePoint now) {
  const std::optional<TimePoint> expires = parse_rfc3339(expiration);
  std::string packed = sigv4::pack_credentials({key_id, secret, session_token});
  FetchResult out;
  if (!expires || session_token.empty() || !sigv4::unpack_credentials(packed)) {
    out = fetch_failure(true, std::string(what) + ": the answer holds no temporary credentials");
  } else if (*expires <= now) {
    out = fetch_failure(true, std::string(what) + ": the keys it answered expired at " +
                                  sanitized_error(expiration, {}));
  } else {
    Fetched fetched;
    fetched.value = SecretBytes(packed);
    fetched.expires_at = *expires;
    out.token = std::move(fetched);
  }
  for (std::string* s : {&packed, &key_id, &secret, &session_token}) cleanse(*s);
  return out;
}

}  // namespace detail

std::shared_ptr<Provider> make_aws_static_provider(const CredentialSpec& spec,
                                                   ProviderContext context) {
  return std::make_shared<AwsStaticProvider>(spec, std::move(context));
}

std::shared_ptr<Provider> make_aws_sts_provider(const CredentialSpec& spec,
                                                ProviderContext context) {
  return std::make_shared<StsProvider>(spec, std::move(context));
}

std::shared_ptr<Provider> make_aws_secrets_manager_provider(const CredentialSpec& spec,
                                                            ProviderContext context) {
  return std::make_shared<SecretsManagerProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
