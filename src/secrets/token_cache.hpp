#pragma once

// The refresh logic of one cached token, pure: no clock, no threads, no I/O. The store drives
// one RefreshState per (credential, scope) on its own thread, with the current time and a
// random number passed in, so every transition is table-tested.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "secrets/token.hpp"

namespace sandgate::secrets {

// Retry delays after consecutive failures: `initial` after the first, doubling, at most
// `max`; each delay is jittered uniformly over [d/2, d) so that many sandgates (or many
// credentials) that failed together do not retry together.
struct BackoffPolicy {
  std::chrono::milliseconds initial{1'000};
  std::chrono::milliseconds max{300'000};
};

// The delay after `failures` consecutive failures (>= 1); `unit_random` in [0, 1).
std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, std::uint32_t failures,
                                        double unit_random);

// When a token obtained at `obtained` and expiring at `expires` is refreshed: `before` ahead
// of its expiry, but never before half of its lifetime has passed (a token that lives less
// than 2 x `before` is refreshed at half-life, not at once). Never expiring: never.
TimePoint refresh_time(TimePoint obtained, TimePoint expires, std::chrono::seconds before);

// One (credential, scope) cache entry.
//
//   fresh       now < refresh_at                      serve
//   refreshing  refresh_at <= now < expires_at        serve; start a refresh unless one is in
//                                                     flight or a failure's backoff runs
//   expired     no token, or now >= expires_at        wait for the refresh in flight, or start
//                                                     one, or (in backoff) fail with the last
//                                                     error at once
//
// At most one refresh is in flight. A failed refresh keeps the cached token (it is served
// until it really expires) and sets a backoff; a success clears the backoff.
class RefreshState {
 public:
  enum class Action {
    serve,              // token() is usable
    serve_and_refresh,  // token() is usable; the caller starts a refresh (now in flight)
    wait,               // no usable token; a refresh is in flight: wait for it
    refresh_and_wait,   // no usable token; the caller starts a refresh (now in flight), waits
    fail,               // no usable token and in backoff: last_error() is the answer
  };

  explicit RefreshState(BackoffPolicy backoff = {}) : backoff_(backoff) {}

  // What a request at `now` does. Marks a refresh in flight when the action starts one.
  Action on_request(TimePoint now);
  // The refresh in flight finished.
  void on_success(std::shared_ptr<const Token> token);
  void on_failure(TimePoint now, TokenError error, double unit_random);

  // The cached token, if usable at `now`.
  std::shared_ptr<const Token> usable(TimePoint now) const;
  const std::shared_ptr<const Token>& token() const { return token_; }
  const std::optional<TokenError>& last_error() const { return last_error_; }
  bool refreshing() const { return in_flight_; }
  std::uint32_t failures() const { return failures_; }
  TimePoint retry_at() const { return retry_at_; }

 private:
  BackoffPolicy backoff_;
  std::shared_ptr<const Token> token_;
  std::optional<TokenError> last_error_;
  bool in_flight_ = false;
  std::uint32_t failures_ = 0;
  TimePoint retry_at_{};  // no refresh starts before this (after a failure)
};

// Whether a token is usable / fresh at `now` (null: neither).
inline bool is_usable(const Token* token, TimePoint now) {
  return token != nullptr && now < token->expires_at;
}
inline bool is_fresh(const Token* token, TimePoint now) {
  return token != nullptr && now < token->refresh_at && now < token->expires_at;
}

}  // namespace sandgate::secrets
