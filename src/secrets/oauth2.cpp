// provider = "oauth2_client_credentials": RFC 6749 section 4.4.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cctype>

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
    // One deadline for the whole fetch: resolve, connect, handshake, request, response.
    const auto deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!client_.error.empty()) co_return fetch_failure(false, client_.error);
    SecretFile secret = read_secret_file(spec_.client_secret_file, "client secret file");
    if (!secret.ok()) co_return fetch_failure(false, secret.error);

    // Client authentication with HTTP Basic (RFC 6749 2.3.1): both parts form-encoded first.
    std::string pair =
        detail::form_encode(spec_.client_id) + ":" + detail::form_encode(secret.content.view());
    std::string basic = base64(pair);
    cleanse(pair);
    std::string body = "grant_type=client_credentials";
    if (const std::string scopes = detail::scope_text(scope, spec_); !scopes.empty()) {
      body += "&scope=" + detail::form_encode(scopes);
    }
    if (!spec_.audience.empty()) body += "&audience=" + detail::form_encode(spec_.audience);
    HttpsRequest request = detail::token_request(spec_.token_url, std::move(body));
    request.headers.emplace_back("Authorization", "Basic " + basic);
    HttpsResult result = co_await https_exchange(client_.ctx, std::move(request), context_.resolver,
                                                 deadline, detail::kMaxTokenResponse);
    FetchResult out =
        detail::access_token_of("credentials." + spec_.name + ": " + spec_.token_url, result,
                                {secret.content.view(), basic}, context_.clock(), spec_.ttl);
    cleanse(basic);
    if (result.response) cleanse(result.response->body);
    co_return out;
  }

 private:
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

FetchResult access_token_of(std::string_view what, const HttpsResult& result,
                            const std::vector<std::string_view>& secrets, TimePoint now,
                            std::chrono::seconds ttl) {
  if (!result.response) return fetch_failure(true, std::string(what) + ": " + result.error);
  const HttpsResponse& response = *result.response;
  if (response.status / 100 != 2) return status_failure(what, response, secrets);
  boost::system::error_code ec;
  const json::value parsed = json::parse(response.body, ec);
  const json::object* object = ec ? nullptr : parsed.if_object();
  const json::value* token = object != nullptr ? object->if_contains("access_token") : nullptr;
  if (token == nullptr || !token->is_string() || token->as_string().empty()) {
    return fetch_failure(true, std::string(what) + ": the answer has no access_token");
  }
  Fetched fetched;
  fetched.expires_at = now + ttl;
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
    if (seconds <= 0) {
      return fetch_failure(true, std::string(what) + ": expires_in is not a positive number");
    }
    fetched.expires_at = now + std::chrono::seconds(seconds);
  }
  fetched.value =
      SecretBytes(std::string_view(token->as_string().data(), token->as_string().size()));
  FetchResult out;
  out.token = std::move(fetched);
  return out;
}

FetchResult status_failure(std::string_view what, const HttpsResponse& response,
                           const std::vector<std::string_view>& secrets,
                           std::string_view named_code) {
  const unsigned status = response.status;
  const bool rate_limited =
      status == 403 && (response.body.find("rate limit") != std::string::npos ||
                        response.body.find("Rate limit") != std::string::npos);
  const bool retryable = status == 429 || status == 408 || status / 100 == 5 || rate_limited;
  std::string code = named_code.empty() ? endpoint_error_code(response.body, secrets)
                                        : sanitized_error(named_code, secrets);
  FetchResult out =
      fetch_failure(retryable, std::string(what) + ": HTTP " + std::to_string(status) + ": " +
                                   (code.empty() ? excerpt(response.body, secrets) : code));
  out.error.endpoint_status = status;
  out.error.endpoint_error = std::move(code);
  return out;
}

namespace {

// Whether one word of an endpoint's error text may be a secret it echoed.
bool secret_looking(std::string_view word, const std::vector<std::string_view>& secrets) {
  for (const std::string_view prefix : {"ghs_", "ghp_", "gho_", "ghu_", "ghr_", "github_pat_",
                                        "eyJ", "Bearer", "Basic", "-----BEGIN"}) {
    if (word.starts_with(prefix) && word.size() > prefix.size() + 3) return true;
  }
  for (const std::string_view secret : secrets) {
    if (secret.size() >= 4 && (word.find(secret) != std::string_view::npos ||
                               secret.find(word) != std::string_view::npos)) {
      return word.size() >= 4;
    }
  }
  // A long run of letters and digits (a key, a token, a hash) with digits in it.
  std::size_t digits = 0;
  for (const char c : word) digits += std::isdigit(static_cast<unsigned char>(c)) != 0 ? 1 : 0;
  return word.size() >= 20 && digits > 0;
}

}  // namespace

std::string endpoint_error_code(std::string_view body,
                                const std::vector<std::string_view>& secrets) {
  boost::system::error_code ec;
  const json::value parsed = json::parse(body, ec);
  const json::object* object = ec ? nullptr : parsed.if_object();
  if (object == nullptr) return {};
  const json::value* field = object->if_contains("error");
  if (field == nullptr || !field->is_string()) field = object->if_contains("message");
  if (field == nullptr || !field->is_string()) return {};
  return sanitized_error({field->as_string().data(), field->as_string().size()}, secrets);
}

std::string sanitized_error(std::string_view raw, const std::vector<std::string_view>& secrets) {
  // Words of printable ASCII; anything else separates words.
  const std::string_view text = raw.substr(0, 4096);
  std::string out;
  std::size_t at = 0;
  while (at < text.size() && out.size() <= kMaxEndpointErrorBytes) {
    const auto printable = [](char c) { return c > 0x20 && c < 0x7f; };
    while (at < text.size() && !printable(text[at])) ++at;
    const std::size_t start = at;
    while (at < text.size() && printable(text[at])) ++at;
    if (start == at) break;
    const std::string_view word = text.substr(start, at - start);
    if (!out.empty()) out += ' ';
    out += secret_looking(word, secrets) ? std::string_view("[redacted]") : word;
  }
  if (out.size() > kMaxEndpointErrorBytes) out.resize(kMaxEndpointErrorBytes);
  return out;
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

HttpsRequest token_request(std::string url, std::string body) {
  HttpsRequest request;
  request.method = "POST";
  request.url = std::move(url);
  request.headers = {{"Accept", "application/json"},
                     {"Content-Type", "application/x-www-form-urlencoded"},
                     {"User-Agent", "sandgate/" + std::string(kVersion)}};
  request.body = std::move(body);
  return request;
}

std::string scope_text(const Scope& scope, const CredentialSpec& spec) {
  const std::vector<std::string>& scopes =
      scope.oauth_scopes.empty() ? spec.scopes : scope.oauth_scopes;
  std::string joined;
  for (const std::string& s : scopes) joined += (joined.empty() ? "" : " ") + s;
  return joined;
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
    case ProviderKind::aws_static:
      return make_aws_static_provider(spec, std::move(context));
    case ProviderKind::aws_secrets_manager:
      return make_aws_secrets_manager_provider(spec, std::move(context));
    case ProviderKind::oauth2_jwt_bearer:
      return make_jwt_bearer_provider(spec, std::move(context));
    case ProviderKind::vault:
      return make_vault_provider(spec, std::move(context));
    case ProviderKind::aws_assume_role:
    case ProviderKind::aws_web_identity:
      return make_aws_sts_provider(spec, std::move(context));
    case ProviderKind::aws_instance:
      return make_aws_instance_provider(spec, std::move(context));
    case ProviderKind::aws_container:
      return make_aws_container_provider(spec, std::move(context));
  }
  return make_static_provider(spec, std::move(context));
}

}  // namespace sandgate::secrets
