// provider = "oauth2_client_credentials": RFC 6749 section 4.4.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "common/version.hpp"
#include "secrets/encoding.hpp"
#include "secrets/http_providers.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

class OAuth2Provider final : public Provider {
 public:
  OAuth2Provider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), client_(detail::client_context(spec.ca_file)) {}

  asio::awaitable<FetchResult> fetch(Scope scope) override {
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    SecretFile secret = read_secret_file(spec_.client_secret_file, "client secret file");
    if (!secret.ok()) co_return fetch_failure(false, secret.error);

    // Client authentication with HTTP Basic (RFC 6749 2.3.1): both parts form-encoded first.
    std::string pair =
        detail::form_encode(spec_.client_id) + ":" + detail::form_encode(secret.content.view());
    std::string basic = base64(pair);
    cleanse(pair);
    HttpsRequest request;
    request.method = "POST";
    request.url = spec_.token_url;
    request.headers = {{"Accept", "application/json"},
                       {"Content-Type", "application/x-www-form-urlencoded"},
                       {"User-Agent", "sandgate/" + std::string(kVersion)},
                       {"Authorization", "Basic " + basic}};
    request.body = "grant_type=client_credentials";
    const std::vector<std::string>& scopes =
        scope.oauth_scopes.empty() ? spec_.scopes : scope.oauth_scopes;
    if (!scopes.empty()) {
      std::string joined;
      for (const std::string& s : scopes) joined += (joined.empty() ? "" : " ") + s;
      request.body += "&scope=" + detail::form_encode(joined);
    }
    if (!spec_.audience.empty()) request.body += "&audience=" + detail::form_encode(spec_.audience);
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), spec_.timeout,
                                                 detail::kMaxTokenResponse);
    FetchResult out = interpret(result, {secret.content.view(), basic});
    cleanse(basic);
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
  FetchResult interpret(const HttpsResult& result,
                        const std::vector<std::string_view>& secrets) const {
    const std::string what = "credentials." + spec_.name + ": " + spec_.token_url;
    if (!result.response) return fetch_failure(true, what + ": " + result.error);
    const HttpsResponse& response = *result.response;
    if (response.status / 100 != 2) return detail::status_failure(what, response, secrets);
    boost::system::error_code ec;
    const json::value parsed = json::parse(response.body, ec);
    const json::object* object = ec ? nullptr : parsed.if_object();
    const json::value* token = object != nullptr ? object->if_contains("access_token") : nullptr;
    if (token == nullptr || !token->is_string() || token->as_string().empty()) {
      return fetch_failure(true, what + ": the answer has no access_token");
    }
    const TimePoint now = context_.clock();
    Fetched fetched;
    fetched.expires_at = now + spec_.ttl;
    if (const json::value* expires_in = object->if_contains("expires_in")) {
      // A number, or (some servers) a string of digits.
      std::int64_t seconds = -1;
      if (expires_in->is_int64()) seconds = expires_in->as_int64();
      if (expires_in->is_uint64()) seconds = static_cast<std::int64_t>(expires_in->as_uint64());
      if (expires_in->is_string()) {
        const auto& s = expires_in->as_string();
        seconds = 0;
        for (const char c : s) {
          if (c < '0' || c > '9' || seconds > 100'000'000) {
            seconds = -1;
            break;
          }
          seconds = seconds * 10 + (c - '0');
        }
      }
      if (seconds <= 0) return fetch_failure(true, what + ": expires_in is not a positive number");
      fetched.expires_at = now + std::chrono::seconds(seconds);
    }
    fetched.value =
        SecretBytes(std::string_view(token->as_string().data(), token->as_string().size()));
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::ClientContext client_;
};

}  // namespace

std::shared_ptr<Provider> make_oauth2_provider(const CredentialSpec& spec,
                                               ProviderContext context) {
  return std::make_shared<OAuth2Provider>(spec, std::move(context));
}

namespace detail {

FetchResult status_failure(std::string_view what, const HttpsResponse& response,
                           const std::vector<std::string_view>& secrets) {
  const unsigned status = response.status;
  const bool rate_limited =
      status == 403 && (response.body.find("rate limit") != std::string::npos ||
                        response.body.find("Rate limit") != std::string::npos);
  const bool retryable = status == 429 || status == 408 || status / 100 == 5 || rate_limited;
  return fetch_failure(retryable, std::string(what) + ": HTTP " + std::to_string(status) + ": " +
                                      excerpt(response.body, secrets));
}

ClientContext client_context(const std::string& ca_file) {
  ClientContext out;
  try {
    out.ctx = make_client_context(ca_file);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

std::string form_encode(std::string_view text) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace detail

std::shared_ptr<Provider> make_provider(const CredentialSpec& spec, ProviderContext context) {
  switch (spec.kind) {
    case ProviderKind::static_file:
      return make_static_provider(spec, std::move(context));
    case ProviderKind::exec:
      return make_exec_provider(spec, std::move(context));
    case ProviderKind::github_app:
      return make_github_app_provider(spec, std::move(context));
    case ProviderKind::oauth2_client_credentials:
      return make_oauth2_provider(spec, std::move(context));
  }
  return make_static_provider(spec, std::move(context));
}

}  // namespace sandgate::secrets
