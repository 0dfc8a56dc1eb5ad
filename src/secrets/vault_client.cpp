#include "secrets/vault_client.hpp"

#include <boost/json.hpp>

#include "common/version.hpp"
#include "secrets/secret_file.hpp"
#include "secrets/token_cache.hpp"

namespace sandgate::secrets::detail {

namespace asio = boost::asio;
namespace json = boost::json;
using Deadline = std::chrono::steady_clock::time_point;

std::string_view vault_error(const json::value& body) {
  const json::value* errors = vault_field(&body, "errors");
  if (errors == nullptr || !errors->is_array() || errors->as_array().empty() ||
      !errors->as_array()[0].is_string()) {
    return {};
  }
  const json::string& first = errors->as_array()[0].as_string();
  return {first.data(), first.size()};
}

const json::value* vault_field(const json::value* object, std::string_view key) {
  return object != nullptr && object->is_object() ? object->as_object().if_contains(key) : nullptr;
}

std::int64_t vault_seconds(const json::value* object, std::string_view key) {
  const json::value* value = vault_field(object, key);
  return value != nullptr && value->is_int64() && value->as_int64() > 0 ? value->as_int64() : 0;
}

bool vault_flag(const json::value* object, std::string_view key) {
  const json::value* value = vault_field(object, key);
  return value != nullptr && value->is_bool() && value->as_bool();
}

VaultClient::VaultClient(const CredentialSpec& spec, const ProviderContext& context)
    : spec_(spec), context_(context), client_(client_context(spec.ca_file)) {}

std::string VaultClient::what(std::string_view api_path) const {
  return "credentials." + spec_.name + ": " + spec_.address + "/v1/" + std::string(api_path);
}

void VaultClient::log(const std::string& line) const {
  if (context_.log) context_.log(line);
}

HttpsRequest VaultClient::request(std::string method, const std::string& api_path) const {
  HttpsRequest out;
  out.method = std::move(method);
  out.url = spec_.address + "/v1/" + api_path;
  out.headers = {{"Accept", "application/json"},
                 {"User-Agent", "sandgate/" + std::string(kVersion)}};
  if (!spec_.vault_namespace.empty()) {
    out.headers.emplace_back("X-Vault-Namespace", spec_.vault_namespace);
  }
  return out;
}

asio::awaitable<VaultReply> VaultClient::exchange(std::string method, const std::string& api_path,
                                                  std::string json_body, std::string_view token,
                                                  const std::vector<std::string_view>& secrets,
                                                  Deadline deadline) {
  HttpsRequest out = request(std::move(method), api_path);
  if (!token.empty()) out.headers.emplace_back("X-Vault-Token", std::string(token));
  if (!json_body.empty()) {
    out.headers.emplace_back("Content-Type", "application/json");
    out.body = std::move(json_body);
  }
  HttpsResult result = co_await https_exchange(client_.ctx, std::move(out), context_.resolver,
                                               deadline, kMaxTokenResponse);
  VaultReply reply;
  if (!result.response) {
    reply.failure = fetch_failure(true, what(api_path) + ": " + result.error);
    co_return reply;
  }
  boost::system::error_code ec;
  reply.body = json::parse(result.response->body, ec);
  if (ec) reply.body = nullptr;
  reply.status = result.response->status;
  if (!reply.ok()) {
    reply.failure =
        status_failure(what(api_path), *result.response, secrets, vault_error(reply.body));
  }
  cleanse(result.response->body);
  co_return reply;
}

asio::awaitable<VaultReply> VaultClient::call(std::string method, std::string api_path,
                                              std::string json_body, Deadline deadline) {
  for (int attempt = 0;; ++attempt) {
    bool fresh = false;
    if (std::optional<FetchResult> failed = co_await ensure_token(deadline, fresh)) {
      VaultReply none;
      none.failure = std::move(*failed);
      co_return none;
    }
    std::string token(token_.value.view());
    const std::vector<std::string_view> secrets = {token};
    std::string method_copy = method;
    std::string body_copy = json_body;
    VaultReply reply = co_await exchange(std::move(method_copy), api_path, std::move(body_copy),
                                         token, secrets, deadline);
    // A kept token refused: revoked, or ended early. A new login once; a token file's content
    // was read for this very fetch, so reading it again would not help.
    const bool again = reply.status == 403 && !fresh && attempt == 0 && spec_.auth != "token";
    if (again && token_.value.view() == token) token_ = KeptToken{};
    cleanse(token);
    if (!again) co_return reply;
  }
}

asio::awaitable<std::optional<FetchResult>> VaultClient::ensure_token(Deadline deadline,
                                                                      bool& fresh) {
  fresh = false;
  if (spec_.auth == "token") co_return co_await file_token(deadline);
  const TimePoint now = context_.clock();
  const bool ending = token_.value.empty() || now + spec_.timeout >= token_.expires_at;
  if (!ending && now < token_.renew_at) co_return std::nullopt;
  if (!ending && token_.renewable) {
    bool renewed = false;
    if (std::optional<FetchResult> failed = co_await renew_token(deadline, renewed)) {
      co_return failed;
    }
    if (renewed) co_return std::nullopt;
  }
  fresh = true;
  co_return co_await login(deadline);
}

asio::awaitable<std::optional<FetchResult>> VaultClient::login(Deadline deadline) {
  const bool approle = spec_.auth == "approle";
  SecretFile file = read_secret_file(approle ? spec_.secret_id_file : spec_.jwt_file,
                                     approle ? "Vault secret id file" : "service-account JWT file");
  if (!file.ok()) co_return fetch_failure(false, file.error);
  const std::string mount = spec_.auth_mount.empty() ? spec_.auth : spec_.auth_mount;
  const std::string api_path = "auth/" + mount + "/login";
  json::object body;
  if (approle) {
    body = {{"role_id", spec_.role_id}, {"secret_id", file.content.view()}};
  } else {
    body = {{"role", spec_.role}, {"jwt", file.content.view()}};
  }
  std::string method = "POST";
  std::string text = json::serialize(body);
  const std::vector<std::string_view> secrets = {file.content.view()};
  const std::string_view no_token;
  VaultReply reply =
      co_await exchange(std::move(method), api_path, std::move(text), no_token, secrets, deadline);
  if (!reply.ok()) co_return std::move(reply.failure);
  const json::value* auth = vault_field(&reply.body, "auth");
  const json::value* client_token = vault_field(auth, "client_token");
  if (client_token == nullptr || !client_token->is_string() || client_token->as_string().empty()) {
    co_return fetch_failure(true, what(api_path) + ": the answer has no auth.client_token");
  }
  const std::int64_t seconds = vault_seconds(auth, "lease_duration");
  keep(client_token->as_string(), seconds, seconds, vault_flag(auth, "renewable"));
  co_return std::nullopt;
}

asio::awaitable<std::optional<FetchResult>> VaultClient::file_token(Deadline deadline) {
  SecretFile file = read_secret_file(spec_.token_file, "Vault token file");
  if (!file.ok()) co_return fetch_failure(false, file.error);
  if (file.content.view() == token_.value.view()) {
    if (!token_.renewable || context_.clock() < token_.renew_at) co_return std::nullopt;
    bool renewed = false;
    if (std::optional<FetchResult> failed = co_await renew_token(deadline, renewed)) {
      co_return failed;
    }
    // Nothing can replace it: it is used as it is until whoever writes the file replaces it.
    if (!renewed) token_.renewable = false;
    co_return std::nullopt;
  }
  // A token not seen before: how long it lives and whether it may be renewed.
  std::string method = "GET";
  const std::string api_path = "auth/token/lookup-self";
  std::string no_body;
  const std::vector<std::string_view> secrets = {file.content.view()};
  VaultReply reply = co_await exchange(std::move(method), api_path, std::move(no_body),
                                       file.content.view(), secrets, deadline);
  if (reply.status == 0) co_return std::move(reply.failure);  // Vault unreachable: later
  if (!reply.ok()) {
    // Perhaps a policy without lookup-self; the read will tell whether the token works.
    log(reply.failure.error.message + " (the token is used, not renewed)");
  }
  const json::value* data = vault_field(&reply.body, "data");
  const std::int64_t ttl = vault_seconds(data, "ttl");
  const std::int64_t creation_ttl = vault_seconds(data, "creation_ttl");
  keep(file.content.view(), ttl, creation_ttl > 0 ? creation_ttl : ttl,
       vault_flag(data, "renewable"));
  co_return std::nullopt;
}

asio::awaitable<std::optional<FetchResult>> VaultClient::renew_token(Deadline deadline,
                                                                     bool& renewed) {
  renewed = false;
  const std::int64_t asked = token_.increment;
  std::string token(token_.value.view());
  const std::vector<std::string_view> secrets = {token};
  std::string method = "POST";
  const std::string api_path = "auth/token/renew-self";
  std::string body = json::serialize(json::object{{"increment", asked}});
  VaultReply reply =
      co_await exchange(std::move(method), api_path, std::move(body), token, secrets, deadline);
  std::optional<FetchResult> failed;
  const json::value* auth = vault_field(&reply.body, "auth");
  const std::int64_t seconds = vault_seconds(auth, "lease_duration");
  if (!reply.ok() && reply.failure.error.retryable) {
    failed = std::move(reply.failure);  // Vault unreachable or failing: later
  } else if (!reply.ok()) {
    log(reply.failure.error.message + " (the Vault token was not renewed)");
  } else if (seconds < asked) {
    // Vault capped it at the token's max TTL: its end is near whatever is done.
    log(what(api_path) + ": renewed for " + std::to_string(seconds) + " s of the " +
        std::to_string(asked) + " asked (its max TTL)");
  } else {
    renewed = true;
    if (token_.value.view() == token) keep(token, seconds, asked, vault_flag(auth, "renewable"));
  }
  cleanse(token);
  co_return failed;
}

void VaultClient::keep(std::string_view value, std::int64_t seconds, std::int64_t increment,
                       bool renewable) {
  const TimePoint now = context_.clock();
  KeptToken kept;
  kept.value = SecretBytes(value);
  if (seconds > 0) {
    kept.expires_at = now + std::chrono::seconds(seconds);
    kept.renew_at = refresh_time(now, kept.expires_at, spec_.refresh_before);
  }
  kept.increment = increment;
  kept.renewable = renewable;
  token_ = std::move(kept);
}

}  // namespace sandgate::secrets::detail
