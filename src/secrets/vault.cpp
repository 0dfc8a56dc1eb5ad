// provider = "vault": a secret read from HashiCorp Vault's HTTP API. Each read logs in first
// (auth "token": the token in token_file; "approle": POST /v1/auth/MOUNT/login with role_id and
// the secret id; "kubernetes": the same with role and the service-account JWT), so a Vault
// token never outlives the read it was got for, and sends X-Vault-Namespace when a namespace
// (Vault Enterprise) is set. Then GET /v1/PATH: KV v2 answers data.data, KV v1 and the other
// engines data; `field` names the value. A lease_duration (a dynamic secret) ends the token's
// life: it is read again before the lease ends (refresh_before), else after ttl.
#include <boost/json.hpp>

#include "common/version.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// Vault's errors: {"errors": ["permission denied"]}; the first is the endpoint's error code.
std::string_view vault_error(const json::object* object) {
  const json::value* errors = object != nullptr ? object->if_contains("errors") : nullptr;
  if (errors == nullptr || !errors->is_array() || errors->as_array().empty() ||
      !errors->as_array()[0].is_string()) {
    return {};
  }
  const json::string& first = errors->as_array()[0].as_string();
  return {first.data(), first.size()};
}

class VaultProvider final : public Provider {
 public:
  VaultProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  asio::awaitable<FetchResult> fetch(Scope) override {
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    std::string token;
    if (std::optional<FetchResult> failed = co_await login(deadline, token)) {
      cleanse(token);
      co_return std::move(*failed);
    }
    HttpsRequest request = base_request("GET", spec_.secret_path);
    request.headers.emplace_back("X-Vault-Token", token);
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = read_secret(result, {token});
    cleanse(token);
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  HttpsRequest base_request(std::string method, const std::string& api_path) const {
    HttpsRequest request;
    request.method = std::move(method);
    request.url = spec_.address + "/v1/" + api_path;
    request.headers = {{"Accept", "application/json"},
                       {"User-Agent", "sandgate/" + std::string(kVersion)}};
    if (!spec_.vault_namespace.empty()) {
      request.headers.emplace_back("X-Vault-Namespace", spec_.vault_namespace);
    }
    return request;
  }

  std::string what(std::string_view api_path) const {
    return "credentials." + spec_.name + ": " + spec_.address + "/v1/" + std::string(api_path);
  }

  // The Vault token to read with, into `token`; or why there is none.
  asio::awaitable<std::optional<FetchResult>> login(std::chrono::steady_clock::time_point deadline,
                                                    std::string& token) {
    if (spec_.auth == "token") {
      SecretFile file = read_secret_file(spec_.token_file, "Vault token file");
      if (!file.ok()) co_return fetch_failure(false, file.error);
      token = std::string(file.content.view());
      co_return std::nullopt;
    }
    const bool approle = spec_.auth == "approle";
    SecretFile file =
        read_secret_file(approle ? spec_.secret_id_file : spec_.jwt_file,
                         approle ? "Vault secret id file" : "service-account JWT file");
    if (!file.ok()) co_return fetch_failure(false, file.error);
    const std::string mount = spec_.auth_mount.empty() ? spec_.auth : spec_.auth_mount;
    const std::string api_path = "auth/" + mount + "/login";
    HttpsRequest request = base_request("POST", api_path);
    request.headers.emplace_back("Content-Type", "application/json");
    json::object body;
    if (approle) {
      body = {{"role_id", spec_.role_id}, {"secret_id", file.content.view()}};
    } else {
      body = {{"role", spec_.role}, {"jwt", file.content.view()}};
    }
    request.body = json::serialize(body);
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    const std::vector<std::string_view> secrets = {file.content.view()};
    if (!result.response) co_return fetch_failure(true, what(api_path) + ": " + result.error);
    boost::system::error_code ec;
    const json::value parsed = json::parse(result.response->body, ec);
    cleanse(result.response->body);
    const json::object* object = ec ? nullptr : parsed.if_object();
    if (result.response->status / 100 != 2)
      co_return failure(api_path, *result.response, object, secrets);
    const json::value* auth = object != nullptr ? object->if_contains("auth") : nullptr;
    const json::value* client_token = auth != nullptr && auth->is_object()
                                          ? auth->as_object().if_contains("client_token")
                                          : nullptr;
    if (client_token == nullptr || !client_token->is_string() ||
        client_token->as_string().empty()) {
      co_return fetch_failure(true, what(api_path) + ": the answer has no auth.client_token");
    }
    token = std::string(client_token->as_string());
    co_return std::nullopt;
  }

  FetchResult failure(std::string_view api_path, const HttpsResponse& response,
                      const json::object* object,
                      const std::vector<std::string_view>& secrets) const {
    return detail::status_failure(what(api_path), response, secrets, vault_error(object));
  }

  FetchResult read_secret(const HttpsResult& result,
                          const std::vector<std::string_view>& secrets) const {
    if (!result.response) return fetch_failure(true, what(spec_.secret_path) + ": " + result.error);
    boost::system::error_code ec;
    const json::value parsed = json::parse(result.response->body, ec);
    const json::object* object = ec ? nullptr : parsed.if_object();
    if (result.response->status / 100 != 2) {
      return failure(spec_.secret_path, *result.response, object, secrets);
    }
    // KV v2 nests the secret's fields in data.data (beside data.metadata).
    const json::value* data = object != nullptr ? object->if_contains("data") : nullptr;
    const json::object* fields = data != nullptr ? data->if_object() : nullptr;
    if (fields != nullptr && fields->contains("metadata") && fields->contains("data") &&
        fields->at("data").is_object()) {
      fields = &fields->at("data").as_object();
    }
    const json::value* value = fields != nullptr ? fields->if_contains(spec_.field) : nullptr;
    if (value == nullptr || !value->is_string() || value->as_string().empty()) {
      return fetch_failure(
          false, what(spec_.secret_path) + ": the secret has no string field " + spec_.field);
    }
    const TimePoint now = context_.clock();
    Fetched fetched;
    fetched.value =
        SecretBytes(std::string_view(value->as_string().data(), value->as_string().size()));
    const json::value* lease = object->if_contains("lease_duration");
    const std::int64_t seconds = lease != nullptr && lease->is_int64() ? lease->as_int64() : 0;
    if (seconds > 0) {
      fetched.expires_at = now + std::chrono::seconds(seconds);
    } else {
      fetched.refresh_at = now + spec_.ttl;
    }
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
};

}  // namespace

std::shared_ptr<Provider> make_vault_provider(const CredentialSpec& spec, ProviderContext context) {
  return std::make_shared<VaultProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
