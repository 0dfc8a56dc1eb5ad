// provider = "github_app": installation access tokens minted with the app's JWT.
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "common/version.hpp"
#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// GitHub accepts an app JWT for at most 10 minutes; iat is backdated for clock drift.
constexpr auto kJwtBackdate = std::chrono::seconds(60);
constexpr auto kJwtLifetime = std::chrono::seconds(540);

// RS256 over base64url(header) "." base64url(claims). Empty on a signing failure.
std::string github_app_jwt(EVP_PKEY* key, std::int64_t app_id, TimePoint now) {
  json::object claims;
  claims["iat"] = detail::unix_seconds(now - kJwtBackdate);
  claims["exp"] = detail::unix_seconds(now + kJwtLifetime);
  claims["iss"] = app_id;
  return detail::rs256_jwt(key, R"({"alg":"RS256","typ":"JWT"})", json::serialize(claims));
}

class GithubAppProvider final : public Provider {
 public:
  GithubAppProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {
    installation_id_ = spec.installation_id;
  }

  asio::awaitable<FetchResult> fetch(Scope scope) override {
    // One deadline for the whole fetch (the installation's lookup included): every lookup,
    // connect, handshake, request and response.
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    std::string error;
    const detail::KeyPtr key = detail::load_rsa_key(spec_.private_key_file, error);
    if (!key) co_return fetch_failure(false, error);
    std::string jwt = github_app_jwt(key.get(), spec_.app_id, context_.clock());
    if (jwt.empty()) co_return fetch_failure(false, "cannot sign the app's JWT with the key");

    if (installation_id_ == 0) {
      FetchResult lookup = co_await find_installation(jwt, deadline);
      if (!lookup.error.message.empty()) {
        cleanse(jwt);
        co_return lookup;
      }
    }
    json::object body;
    if (!scope.repositories.empty()) {
      json::array names;
      for (const std::string& repository : scope.repositories) {
        names.emplace_back(repository.substr(repository.find('/') + 1));  // without the owner
      }
      body["repositories"] = std::move(names);
    }
    const Permissions& permissions =
        scope.permissions.empty() ? spec_.permissions : scope.permissions;
    if (!permissions.empty()) {
      json::object p;
      for (const auto& [name, level] : permissions) p[name] = level;
      body["permissions"] = std::move(p);
    }
    HttpsRequest request = base_request(jwt);
    request.method = "POST";
    request.url =
        spec_.api_url + "/app/installations/" + std::to_string(installation_id_) + "/access_tokens";
    request.headers.emplace_back("Content-Type", "application/json");
    request.body = json::serialize(body);
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = interpret(result, jwt);
    cleanse(jwt);
    // An installation looked up by account may have been replaced (the app reinstalled): look
    // it up again next time.
    if (result.response && result.response->status == 404 && !spec_.installation_account.empty()) {
      installation_id_ = 0;
    }
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  HttpsRequest base_request(const std::string& jwt) const {
    HttpsRequest request;
    request.headers = {{"Accept", "application/vnd.github+json"},
                       {"X-GitHub-Api-Version", "2022-11-28"},
                       {"User-Agent", "sandgate/" + std::string(kVersion)},
                       {"Authorization", "Bearer " + jwt}};
    return request;
  }

  FetchResult interpret(const HttpsResult& result, const std::string& jwt) const {
    const std::string what = "credentials." + spec_.name + ": " + spec_.api_url;
    if (!result.response) return fetch_failure(true, what + ": " + result.error);
    const HttpsResponse& response = *result.response;
    if (response.status / 100 != 2) {
      return detail::status_failure(
          what + " (installation " + std::to_string(installation_id_) + ")", response, {jwt});
    }
    boost::system::error_code ec;
    const json::value parsed = json::parse(response.body, ec);
    const json::object* object = ec ? nullptr : parsed.if_object();
    const json::value* token = object != nullptr ? object->if_contains("token") : nullptr;
    const json::value* expires = object != nullptr ? object->if_contains("expires_at") : nullptr;
    if (token == nullptr || !token->is_string() || token->as_string().empty() ||
        expires == nullptr || !expires->is_string()) {
      return fetch_failure(true, what + ": the answer has no token and expires_at");
    }
    const auto expires_at =
        parse_rfc3339(std::string_view(expires->as_string().data(), expires->as_string().size()));
    if (!expires_at) return fetch_failure(true, what + ": expires_at is not a date-time");
    Fetched fetched;
    fetched.value =
        SecretBytes(std::string_view(token->as_string().data(), token->as_string().size()));
    fetched.expires_at = *expires_at;
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  // GET /orgs/{account}/installation, then /users/{account}/installation; remembers the id.
  asio::awaitable<FetchResult> find_installation(const std::string& jwt,
                                                 std::chrono::steady_clock::time_point deadline) {
    const std::string what =
        "credentials." + spec_.name + ": installation of " + spec_.installation_account;
    for (const std::string_view kind : {"orgs", "users"}) {
      HttpsRequest request = base_request(jwt);
      request.method = "GET";
      request.url = spec_.api_url + "/" + std::string(kind) + "/" + spec_.installation_account +
                    "/installation";
      HttpsResult result = co_await https_exchange(
          client_.ctx, std::move(request), context_.resolver, deadline, detail::kMaxTokenResponse);
      if (!result.response) co_return fetch_failure(true, what + ": " + result.error);
      if (result.response->status == 404 && kind == "orgs") continue;
      if (result.response->status / 100 != 2) {
        co_return detail::status_failure(what, *result.response, {jwt});
      }
      boost::system::error_code ec;
      const json::value parsed = json::parse(result.response->body, ec);
      const json::object* object = ec ? nullptr : parsed.if_object();
      const json::value* id = object != nullptr ? object->if_contains("id") : nullptr;
      if (id == nullptr || !id->is_int64() || id->as_int64() <= 0) {
        co_return fetch_failure(true, what + ": the answer has no installation id");
      }
      installation_id_ = id->as_int64();
      if (context_.log) {
        context_.log("credentials." + spec_.name + ": " + spec_.installation_account +
                     " is installation " + std::to_string(installation_id_));
      }
      co_return FetchResult{};
    }
    co_return fetch_failure(false, what + ": the app is not installed on that account");
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
  std::int64_t installation_id_ = 0;  // the store's thread only
};

}  // namespace

std::shared_ptr<Provider> make_github_app_provider(const CredentialSpec& spec,
                                                   ProviderContext context) {
  return std::make_shared<GithubAppProvider>(spec, std::move(context));
}

namespace detail {

KeyPtr load_rsa_key(const std::string& path, std::string& error) {
  SecretFile file = read_secret_file(path, "private key file");
  if (!file.ok()) {
    error = file.error;
    return nullptr;
  }
  KeyPtr key = parse_rsa_key(file.content.view());
  if (!key) error = path + ": not an unencrypted PEM RSA private key";
  return key;
}

KeyPtr parse_rsa_key(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  KeyPtr key(bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) return nullptr;
  return key;
}

std::int64_t unix_seconds(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string rs256_jwt(EVP_PKEY* key, std::string_view header, std::string_view claims) {
  const std::string signing_input = base64url(header) + "." + base64url(claims);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  std::string signature;
  std::size_t length = 0;
  if (md != nullptr && EVP_DigestSignInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestSign(md, nullptr, &length,
                     reinterpret_cast<const unsigned char*>(signing_input.data()),
                     signing_input.size()) == 1) {
    signature.resize(length);
    if (EVP_DigestSign(md, reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(signing_input.data()),
                       signing_input.size()) == 1) {
      signature.resize(length);
    } else {
      signature.clear();
    }
  }
  EVP_MD_CTX_free(md);
  ERR_clear_error();
  if (signature.empty()) return {};
  return signing_input + "." + base64url(signature);
}

}  // namespace detail

}  // namespace sandgate::secrets
