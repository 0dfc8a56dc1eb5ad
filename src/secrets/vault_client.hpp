#pragma once

// Internal to src/secrets: the vault provider's way to Vault's HTTP API, and the Vault token it
// calls with. The token is kept between fetches, not got afresh for each:
//   auth "approle", "kubernetes": the login's auth.client_token, renewed with
//     POST /v1/auth/token/renew-self when it is due (refresh_before its end, never before half
//     its life), and replaced by a new login when renewal is refused, when Vault renews it for
//     less than asked (it is at its max TTL), when it is not renewable and due, or when it has
//     ended;
//   auth "token": the token in token_file, read on every fetch (a rotated file is picked up);
//     each new token is looked up once (GET /v1/auth/token/lookup-self) and, when renewable,
//     renewed when due, as Vault Agent's token_file method does. Nothing can replace it, so a
//     refused renewal only stops further attempts.
// A request that Vault refuses with 403 while it used a token kept from an earlier fetch (it may
// have been revoked) gets a new token once (a login, or the file read again) and is sent again.
//
// Runs on the credential store's io_context; fetches of different scopes may interleave at
// every co_await, so the token is copied out for each request and replaced only as a whole.

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/http_providers.hpp"
#include "secrets/provider.hpp"

namespace sandgate::secrets::detail {

// Vault's answer to one request, or why there is none.
struct VaultReply {
  unsigned status = 0;      // 0: no answer (Vault unreachable, or no Vault token to be had)
  boost::json::value body;  // the answer's JSON; null when it is not JSON
  // When !ok(): what a fetch that stops here fails with ("credentials.NAME: URL: HTTP 403:
  // permission denied", retryable as status_failure says; a transport failure is retryable).
  // Never holds the Vault token, the secret id or the JWT.
  FetchResult failure;
  bool ok() const { return status / 100 == 2; }
};

// Vault's errors: {"errors": ["permission denied"]}; the first, "" when there is none.
std::string_view vault_error(const boost::json::value& body);

// A member of a JSON object; null when `object` is null, not an object, or has no `key`.
const boost::json::value* vault_field(const boost::json::value* object, std::string_view key);
// A duration in whole seconds, as Vault gives them (lease_duration, ttl); 0 when absent or
// not a non-negative integer.
std::int64_t vault_seconds(const boost::json::value* object, std::string_view key);
// Whether a member is `true` (absent: false).
bool vault_flag(const boost::json::value* object, std::string_view key);

class VaultClient {
 public:
  VaultClient(const CredentialSpec& spec, const ProviderContext& context);

  // The client context could not be made (a ca_file that does not load): every fetch fails.
  const std::string& setup_error() const { return client_.error; }

  // `method` /v1/`api_path` with the Vault token (and `json_body` when not empty), over by
  // `deadline`. Gets or renews the token first as described above.
  boost::asio::awaitable<VaultReply> call(std::string method, std::string api_path,
                                          std::string json_body,
                                          std::chrono::steady_clock::time_point deadline);

  // "credentials.NAME: ADDRESS/v1/PATH", the start of every message about `api_path`.
  std::string what(std::string_view api_path) const;

 private:
  // The kept Vault token; an empty value: none.
  struct KeptToken {
    SecretBytes value;
    TimePoint expires_at = TimePoint::max();
    TimePoint renew_at = TimePoint::max();  // renew (or log in again) from here on
    std::int64_t increment = 0;             // seconds asked for on renewal: its first duration
    bool renewable = false;
  };

  HttpsRequest request(std::string method, const std::string& api_path) const;
  void log(const std::string& line) const;
  // One exchange with `token` (none for a login), its answer parsed; `secrets` are kept out
  // of the failure's message.
  boost::asio::awaitable<VaultReply> exchange(std::string method, const std::string& api_path,
                                              std::string json_body, std::string_view token,
                                              const std::vector<std::string_view>& secrets,
                                              std::chrono::steady_clock::time_point deadline);
  // Makes token_ usable now; `fresh` says whether it was got by this call (a 403 then means
  // the token itself is refused, and getting another would not help). A failure: no token.
  boost::asio::awaitable<std::optional<FetchResult>> ensure_token(
      std::chrono::steady_clock::time_point deadline, bool& fresh);
  boost::asio::awaitable<std::optional<FetchResult>> login(
      std::chrono::steady_clock::time_point deadline);
  // auth "token": the file's token, looked up when it is new, renewed when due.
  boost::asio::awaitable<std::optional<FetchResult>> file_token(
      std::chrono::steady_clock::time_point deadline);
  // renew-self with the kept token. `renewed` false: Vault refused, or gave less than asked (the
  // token is at its max TTL). A failure: Vault is unreachable or failing (retry later).
  boost::asio::awaitable<std::optional<FetchResult>> renew_token(
      std::chrono::steady_clock::time_point deadline, bool& renewed);
  // Keeps `value` as the token, for `seconds` (0: it never expires).
  void keep(std::string_view value, std::int64_t seconds, std::int64_t increment, bool renewable);

  CredentialSpec spec_;
  ProviderContext context_;
  ClientContext client_;
  KeptToken token_;
};

}  // namespace sandgate::secrets::detail
