// provider = "oauth2_jwt_bearer": RFC 7523 section 2.1. An assertion (a JWT signed RS256 with
// the credential's key) is exchanged at the token endpoint for an access token. A Google
// service-account JSON key names its own issuer (client_email), key id (private_key_id) and
// token endpoint (token_uri); a PEM key needs `issuer` and `token_url` from the config.
#include <openssl/crypto.h>

#include <boost/json.hpp>

#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr std::string_view kGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer";
constexpr std::string_view kGoogleTokenUrl = "https://oauth2.googleapis.com/token";
// The assertion's lifetime: Google accepts at most an hour.
constexpr auto kAssertionLifetime = std::chrono::seconds(3600);

// What the key file says: the key, and (a service-account JSON key) who it belongs to.
struct KeyFile {
  detail::KeyPtr key;
  std::string issuer;     // client_email
  std::string key_id;     // private_key_id
  std::string token_url;  // token_uri
  std::string error;
};

KeyFile read_key_file(const std::string& path) {
  KeyFile out;
  SecretFile file = read_secret_file(path, "key file");
  if (!file.ok()) {
    out.error = file.error;
    return out;
  }
  const std::string_view text = file.content.view();
  if (text.find("-----BEGIN") == 0) {
    out.key = detail::parse_rsa_key(text);
    if (!out.key) out.error = path + ": not an unencrypted PEM RSA private key";
    return out;
  }
  boost::system::error_code ec;
  json::value parsed = json::parse(text, ec);
  const json::object* object = ec ? nullptr : parsed.if_object();
  const auto field = [&](std::string_view name) -> std::string {
    const json::value* v = object != nullptr ? object->if_contains(name) : nullptr;
    return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
  };
  std::string pem = field("private_key");
  out.key = detail::parse_rsa_key(pem);
  cleanse(pem);
  // The parsed copy of the key is wiped too.
  if (json::object* mutable_object = parsed.if_object()) {
    if (json::value* v = mutable_object->if_contains("private_key");
        v != nullptr && v->is_string()) {
      OPENSSL_cleanse(v->as_string().data(), v->as_string().size());
    }
  }
  if (!out.key) {
    out.error = path +
                ": neither a PEM RSA private key nor a service-account JSON key with a "
                "private_key";
    return out;
  }
  out.issuer = field("client_email");
  out.key_id = field("private_key_id");
  out.token_url = field("token_uri");
  return out;
}

class JwtBearerProvider final : public Provider {
 public:
  JwtBearerProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  asio::awaitable<FetchResult> fetch(Scope scope) override {
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    const KeyFile key = read_key_file(spec_.key_file);
    if (!key.key) co_return fetch_failure(false, key.error);
    const std::string issuer = spec_.issuer.empty() ? key.issuer : spec_.issuer;
    std::string token_url = spec_.token_url.empty() ? key.token_url : spec_.token_url;
    if (token_url.empty() && !key.issuer.empty()) token_url = kGoogleTokenUrl;
    if (issuer.empty() || token_url.empty()) {
      co_return fetch_failure(false, "credentials." + spec_.name + ": " + spec_.key_file +
                                         " names no issuer or token endpoint: set issuer and "
                                         "token_url");
    }
    if (!token_url.starts_with("https://")) {
      co_return fetch_failure(false, "credentials." + spec_.name + ": the key's token_uri " +
                                         token_url + " is not https");
    }

    json::object header{{"alg", "RS256"}, {"typ", "JWT"}};
    if (!key.key_id.empty()) header["kid"] = key.key_id;
    const TimePoint now = context_.clock();
    json::object claims{{"iss", issuer},
                        {"aud", spec_.audience.empty() ? token_url : spec_.audience},
                        {"iat", detail::unix_seconds(now)},
                        {"exp", detail::unix_seconds(now + kAssertionLifetime)}};
    if (!spec_.subject.empty()) claims["sub"] = spec_.subject;
    // Google reads the scopes from the assertion (space-separated), not from the form.
    if (const std::string scopes = detail::scope_text(scope, spec_); !scopes.empty()) {
      claims["scope"] = scopes;
    }
    std::string assertion =
        detail::rs256_jwt(key.key.get(), json::serialize(header), json::serialize(claims));
    if (assertion.empty()) co_return fetch_failure(false, "cannot sign the assertion with the key");

    HttpsRequest request =
        detail::token_request(token_url, "grant_type=" + detail::form_encode(kGrantType) +
                                             "&assertion=" + detail::form_encode(assertion));
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out = detail::access_token_of("credentials." + spec_.name + ": " + token_url,
                                              result, {assertion}, now, spec_.ttl);
    cleanse(assertion);
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
};

}  // namespace

std::shared_ptr<Provider> make_jwt_bearer_provider(const CredentialSpec& spec,
                                                   ProviderContext context) {
  return std::make_shared<JwtBearerProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
