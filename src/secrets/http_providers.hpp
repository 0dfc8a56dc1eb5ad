#pragma once

// Internal to src/secrets: what the providers that fetch over HTTP(S) share.

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/https_client.hpp"
#include "secrets/provider.hpp"

namespace sandgate::secrets::detail {

inline constexpr std::size_t kMaxTokenResponse = 64 * 1024;

// Turns a non-2xx answer into a failure: "<what>: HTTP <status>: <code>" when the body is JSON
// naming an error (endpoint_error_code), else "<what>: HTTP <status>: <excerpt>"; 401, 403 (but
// not a rate limit), 404, 400 and 422 are not retryable, 429 and 5xx are. The error carries
// the status and the code (TokenError::endpoint_status, endpoint_error) for the audit line.
// `named_code`: the error code the caller found in the body itself (AWS's __type, STS's
// <Code>, Vault's errors[0]), used, made safe as endpoint_error_code makes it, instead.
FetchResult status_failure(std::string_view what, const HttpsResponse& response,
                           const std::vector<std::string_view>& secrets,
                           std::string_view named_code = {});

// The error code a token endpoint's JSON body names: OAuth2's `error` (RFC 6749 5.2, e.g.
// "invalid_client"), else GitHub's `message` (e.g. "Bad credentials"); "" when the body is not
// JSON or names neither. Only printable ASCII is kept, every word that looks like a secret
// (a known token prefix such as ghs_ or eyJ, any of `secrets`, or a long run of letters and
// digits) becomes "[redacted]", and the result is cut to kMaxEndpointErrorBytes.
std::string endpoint_error_code(std::string_view body,
                                const std::vector<std::string_view>& secrets);
// The same for an error text already extracted.
std::string sanitized_error(std::string_view text, const std::vector<std::string_view>& secrets);

// The client context for `ca_file`, or the reason it cannot be made (then every fetch fails).
struct ClientContext {
  std::shared_ptr<boost::asio::ssl::context> ctx;
  std::string error;
};
ClientContext client_context(const std::string& ca_file);

// application/x-www-form-urlencoded / RFC 3986 percent-encoding of everything but unreserved.
std::string form_encode(std::string_view text);

// An OAuth 2.0 token request (RFC 6749 4.4, RFC 7523 2.1): POST `body`, a form, to `url`,
// asking for JSON.
HttpsRequest token_request(std::string url, std::string body);
// The scopes a token is asked for, space-separated (RFC 6749 3.3): the rule's, else the
// credential's; "" when neither names any.
std::string scope_text(const Scope& scope, const CredentialSpec& spec);

// Private keys for JWTs (github_app, oauth2_jwt_bearer): an unencrypted PEM RSA key, from a
// secret file (read on every use, so a rotated key is picked up) or from text.
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
KeyPtr load_rsa_key(const std::string& path, std::string& error);
KeyPtr parse_rsa_key(std::string_view pem);

std::int64_t unix_seconds(TimePoint t);
// RS256 JWS compact serialization of `claims` (JSON) under `header` (JSON); empty on a
// signing failure.
std::string rs256_jwt(EVP_PKEY* key, std::string_view header, std::string_view claims);

// An OAuth 2.0 token response (RFC 6749 5.1: access_token, expires_in as a number or a string
// of digits; `ttl` when absent), or the failure it is (status_failure for a non-2xx).
FetchResult access_token_of(std::string_view what, const HttpsResult& result,
                            const std::vector<std::string_view>& secrets, TimePoint now,
                            std::chrono::seconds ttl);

// Temporary AWS keys from an answer (STS's XML, the instance or container endpoint's JSON),
// packed (sigv4::pack_credentials), until `expiration` (RFC 3339); or "<what>: the answer
// holds no temporary credentials" (a field missing or malformed) or that they expired already,
// both retryable. The three strings are wiped.
FetchResult temporary_keys(std::string_view what, std::string& key_id, std::string& secret,
                           std::string& session_token, std::string_view expiration, TimePoint now);

}  // namespace sandgate::secrets::detail
