#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dns/resolver.hpp"
#include "secrets/provider.hpp"
#include "secrets/scope.hpp"
#include "secrets/spec.hpp"
#include "secrets/token.hpp"
#include "secrets/token_cache.hpp"

namespace sandgate::secrets {

struct StoreOptions {
  // Where "now" comes from (token expiry is wall-clock time); tests move it.
  std::function<TimePoint()> clock = [] { return WallClock::now(); };
  BackoffPolicy backoff;
  // [0, 1) for the backoff's jitter; default: a seeded generator.
  std::function<double()> random;
  // A line for the daemon's log: refresh failures, a helper's (redacted) stderr. Never holds a
  // secret. Called on the store's thread.
  std::function<void(std::string_view)> log;
  // How token endpoints' names are resolved: the daemon's [dns] settings, so that they use the
  // servers, static hosts and timeout the proxy's own lookups use.
  dns::ResolverOptions dns;
};

// What a scrape of the store shows for one credential (no per-sandbox label).
struct CredentialStats {
  std::string name;
  ProviderKind kind = ProviderKind::static_file;
  std::uint64_t refreshes = 0;  // fetches started
  std::uint64_t failures = 0;   // fetches that failed
  // Seconds until the soonest-expiring usable cached token expires; nullopt when none is
  // cached or none expires (static).
  std::optional<double> seconds_to_expiry;
  // Entries of its token cache: one per scope a rule asked for (each holds a token, a refresh
  // in flight or its last failure).
  std::size_t cache_entries = 0;
};

// Every credential's tokens, for the daemon's whole life: it lives outside the config
// snapshot, and update() on reload keeps the tokens of credentials whose spec did not change.
//
// Threads: the store owns one thread and io_context on which providers run and all refresh
// state changes (RefreshState per (credential, scope)), and a dns::Resolver (c-ares) on that
// io_context for the providers' token endpoints: lookups are asynchronous, so a name that never
// answers holds up only the fetch that asked for it (each fetch has its own deadline). Worker
// coroutines call get() on their own io_contexts: a fresh cached token is read with atomic loads
// only (no lock, no thread hop); otherwise the request is posted to the store's thread and the
// caller waits, bounded by max_wait, for the one refresh in flight, then resumes on its own
// executor.
class CredentialStore {
 public:
  // Throws std::runtime_error when options.dns is invalid (startup only).
  explicit CredentialStore(StoreOptions options = {});
  ~CredentialStore();  // stops the thread; waiting callers time out on their own
  CredentialStore(const CredentialStore&) = delete;
  CredentialStore& operator=(const CredentialStore&) = delete;

  // Replaces the set of credentials (sorted or not). Blocks until applied. A credential whose
  // spec is unchanged keeps its provider and cached tokens; a changed or removed one is
  // dropped, its waiting callers answered "reconfigured" (retryable).
  void update(std::vector<CredentialSpec> specs);

  // A token of `credential` for `scope`, or why there is none. Never throws. `credential`
  // and `scope` are referred to until the returned awaitable completes: pass the rule's own
  // (they live in the config snapshot the session holds) and co_await it at once.
  boost::asio::awaitable<TokenResult> get(std::string_view credential, const Scope& scope,
                                          std::chrono::milliseconds max_wait);

  // get()'s hot path on its own, for a caller that wants no coroutine frame: the cached token
  // when one is usable now (when it is due for refresh, one is started in the background);
  // null when get() has to wait. Any thread; atomic loads only.
  std::shared_ptr<const Token> cached(std::string_view credential, const Scope& scope);

  std::vector<CredentialStats> stats() const;

  // For tests: how many (credential, scope) entries exist.
  std::size_t slot_count() const;

 private:
  struct Slot;
  struct Credential;
  struct Waiter;
  using CredentialMap = std::vector<std::shared_ptr<Credential>>;  // sorted by name

  std::shared_ptr<Credential> find(std::string_view name) const;
  std::shared_ptr<const Token> cached(const std::shared_ptr<Credential>& credential,
                                      const std::string& key, const Scope& scope);
  // Store thread.
  void handle(std::shared_ptr<Credential> credential, std::string key, Scope scope,
              std::shared_ptr<Waiter> waiter);
  void start_refresh(std::shared_ptr<Credential> credential, std::shared_ptr<Slot> slot);
  boost::asio::awaitable<void> refresh(std::shared_ptr<Credential> credential,
                                       std::shared_ptr<Slot> slot);
  // ProviderContext::token_of: get() of the unscoped token, owning what get() refers to.
  boost::asio::awaitable<TokenResult> token_for_provider(std::string name,
                                                         std::chrono::milliseconds max_wait);
  void log(std::string_view line) const;

  StoreOptions options_;
  boost::asio::io_context io_;
  std::atomic<std::shared_ptr<const CredentialMap>> credentials_;
  // Made by the constructor before the thread starts, used and destroyed on the thread.
  std::unique_ptr<dns::Resolver> resolver_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace sandgate::secrets
