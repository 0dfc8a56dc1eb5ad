#pragma once

// Credential providers: each turns a CredentialSpec into tokens. They run only on the
// credential store's own io_context (its thread), one fetch per (credential, scope) at a
// time; fetches of different scopes of one credential may overlap.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "secrets/scope.hpp"
#include "secrets/secret_bytes.hpp"
#include "secrets/spec.hpp"
#include "secrets/token.hpp"

namespace sandgate::dns {
class Resolver;
}

namespace sandgate::secrets {

// A token as a provider fetched it.
struct Fetched {
  SecretBytes value;
  TimePoint expires_at = TimePoint::max();
  // When to refresh; unset: refresh_time(now, expires_at, spec.refresh_before).
  std::optional<TimePoint> refresh_at;
};

struct FetchResult {
  std::optional<Fetched> token;
  TokenError error;  // when !token
};

// What providers get from the store.
struct ProviderContext {
  std::function<TimePoint()> clock;
  // A line for the daemon's log (a helper's stderr, a lookup's result); never a secret.
  std::function<void(std::string_view)> log;
  // Resolves token endpoints' host names (https_exchange): the store's own, on the store's
  // io_context; it outlives every fetch. Null: only IP literals and localhost can be reached.
  dns::Resolver* resolver = nullptr;
  // Another credential's token as a request gets it (cached, refreshed by one fetch at a
  // time), waited for at most `max_wait`: the keys an aws_assume_role or aws_secrets_manager
  // signs with (aws_credential). Runs on the store's io_context. Config refuses a cycle, which
  // would only end in timeouts. Null outside a store.
  std::function<boost::asio::awaitable<TokenResult>(std::string name,
                                                    std::chrono::milliseconds max_wait)>
      token_of;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // One token for `scope`. Expected failures come back as values (never an exception).
  virtual boost::asio::awaitable<FetchResult> fetch(Scope scope) = 0;
};

// The provider of `spec`'s kind. One whose setup fails (a ca_file that does not load) fails
// every fetch with that reason, not retryable.
std::shared_ptr<Provider> make_provider(const CredentialSpec& spec, ProviderContext context);

// The pieces, for tests.
std::shared_ptr<Provider> make_static_provider(const CredentialSpec& spec, ProviderContext context);
std::shared_ptr<Provider> make_exec_provider(const CredentialSpec& spec, ProviderContext context);
std::shared_ptr<Provider> make_github_app_provider(const CredentialSpec& spec,
                                                   ProviderContext context);
std::shared_ptr<Provider> make_oauth2_provider(const CredentialSpec& spec, ProviderContext context);
std::shared_ptr<Provider> make_aws_static_provider(const CredentialSpec& spec,
                                                   ProviderContext context);
std::shared_ptr<Provider> make_aws_secrets_manager_provider(const CredentialSpec& spec,
                                                            ProviderContext context);
std::shared_ptr<Provider> make_jwt_bearer_provider(const CredentialSpec& spec,
                                                   ProviderContext context);
std::shared_ptr<Provider> make_vault_provider(const CredentialSpec& spec, ProviderContext context);
std::shared_ptr<Provider> make_aws_sts_provider(const CredentialSpec& spec,
                                                ProviderContext context);
std::shared_ptr<Provider> make_aws_instance_provider(const CredentialSpec& spec,
                                                     ProviderContext context);
std::shared_ptr<Provider> make_aws_container_provider(const CredentialSpec& spec,
                                                      ProviderContext context);

// A failure result.
inline FetchResult fetch_failure(bool retryable, std::string message) {
  FetchResult out;
  out.error = {retryable, std::move(message)};
  return out;
}

// Parses an RFC 3339 date-time in UTC ("2016-07-11T22:14:10Z", fractional seconds and a
// numeric offset accepted). nullopt when it is not one.
std::optional<TimePoint> parse_rfc3339(std::string_view text);

}  // namespace sandgate::secrets
