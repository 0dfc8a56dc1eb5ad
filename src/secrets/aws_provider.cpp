// The providers of AWS credentials. Each yields one token holding the key id, the secret and
// the session token (sigv4::pack_credentials), which requests get by being signed again
// (docs/credentials.md, "AWS").
//
// provider = "aws_static": a key pair (and, for temporary credentials, a session token) in
// files, read again when a file changes.
//
// provider = "aws_secrets_manager": a secret (or one JSON field of it) read with GetSecretValue,
// signed with an aws_static credential's keys, read again every ttl.
#include <boost/json.hpp>
#include <ctime>

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

// The keys of an aws_static credential (or those an aws_secrets_manager one reads with),
// packed (sigv4::pack_credentials); a failure names the file. Never retryable: a missing,
// unreadable or malformed file cannot mend itself without the operator.
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

// provider = "aws_secrets_manager": GetSecretValue, signed with the aws_credential's keys.
class SecretsManagerProvider final : public Provider {
 public:
  SecretsManagerProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope) override {
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    FetchResult keys = read_aws_keys(spec_);
    if (!keys.token) co_return keys;
    const std::optional<sigv4::Credentials> real =
        sigv4::unpack_credentials(keys.token->value.view());

    json::object body{{"SecretId", spec_.secret_id}};
    if (!spec_.version_stage.empty()) body["VersionStage"] = spec_.version_stage;
    HttpsRequest request;
    request.method = "POST";
    request.url = endpoint();
    request.body = json::serialize(body);
    const std::string amz_date = amz_date_of(context_.clock());
    const std::string host = request.url.substr(8, request.url.find('/', 8) - 8);
    std::vector<sigv4::Field> signed_fields = {{"content-type", "application/x-amz-json-1.1"},
                                               {"host", host},
                                               {"x-amz-date", amz_date},
                                               {"x-amz-target", "secretsmanager.GetSecretValue"}};
    if (!real->session_token.empty())
      signed_fields.push_back({"x-amz-security-token", real->session_token});
    const sigv4::Scope scope{amz_date.substr(0, 8), spec_.region, "secretsmanager"};
    const std::string authorization = sigv4::authorization_for(
        {"POST", "/", signed_fields}, sha256_hex(request.body), scope, amz_date, *real);
    for (const sigv4::Field& f : signed_fields) {
      if (f.name != "host") request.headers.emplace_back(f.name, f.value);
    }
    request.headers.emplace_back("Authorization", authorization);
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

  // YYYYMMDDTHHMMSSZ, UTC.
  static std::string amz_date_of(TimePoint t) {
    const std::time_t seconds = WallClock::to_time_t(t);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char out[17];
    std::strftime(out, sizeof out, "%Y%m%dT%H%M%SZ", &utc);
    return out;
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
      FetchResult out = detail::status_failure(what, response, secrets);
      // AWS names the error in __type ("ResourceNotFoundException", or namespaced with '#').
      const json::value* type = object != nullptr ? object->if_contains("__type") : nullptr;
      if (type != nullptr && type->is_string()) {
        std::string_view code(type->as_string().data(), type->as_string().size());
        code = code.substr(code.find('#') == std::string_view::npos ? 0 : code.find('#') + 1);
        out.error.endpoint_error =
            detail::endpoint_error_code(json::serialize(json::object{{"error", code}}), secrets);
        out.error.message =
            what + ": HTTP " + std::to_string(response.status) + ": " + out.error.endpoint_error;
      }
      return out;
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

std::shared_ptr<Provider> make_aws_static_provider(const CredentialSpec& spec,
                                                   ProviderContext context) {
  return std::make_shared<AwsStaticProvider>(spec, std::move(context));
}

std::shared_ptr<Provider> make_aws_secrets_manager_provider(const CredentialSpec& spec,
                                                            ProviderContext context) {
  return std::make_shared<SecretsManagerProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
